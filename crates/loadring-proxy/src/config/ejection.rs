//! The proxy's passive ejection (`eject_after`, `eject_for`) as the
//! balancer's lifecycle: the policy a cluster's balancer actually runs.

use std::time::Duration;

use loadring::PolicySpec;

use crate::error::{ConfigError, ConfigErrorKind};

use super::types::ClusterConfig;

/// `spec` with lifecycle `keys` added: to the innermost policy of a
/// locality chain, where lifecycle keys go.
fn with_keys(spec: &PolicySpec, keys: &[(&str, String)]) -> Result<PolicySpec, ConfigError> {
    if let Some(inner) = spec.inner() {
        let inner = with_keys(inner, keys)?;
        return spec
            .over(inner)
            .map_err(|e| ConfigError::new(ConfigErrorKind::Policy, e.to_string()));
    }
    keys.iter().try_fold(spec.clone(), |spec, (key, value)| {
        spec.with(key, value).map_err(|e| {
            ConfigError::new(
                ConfigErrorKind::Policy,
                format!(
                    "passive ejection (eject_after/eject_for) as the policy's `{key}={value}`: {e}"
                ),
            )
        })
    })
}

/// The most failed requests in a row `eject_after` takes (the lifecycle's
/// range).
pub(crate) const MAX_EJECT_AFTER: u32 = 1_000;
/// The longest `eject_for` (the lifecycle's range).
pub(crate) const MAX_EJECT_FOR: Duration = Duration::from_secs(3_600);

impl ClusterConfig {
    /// The policy the cluster's balancer runs: the configured one with the
    /// passive ejection of `eject_after`/`eject_for` as its lifecycle's
    /// (`eject_after=N eject_for=DUR`, with `max_eject_for=` the same
    /// duration and `max_ejection_percent=100`: a fixed time and no budget,
    /// as the proxy's ejection has always been); under a locality policy, on
    /// the policy it wraps, whose instances judge each zone on its own (as
    /// its lifecycle keys go there). A policy that sets its own
    /// `eject_after=` keeps its own ejection (Envoy's, in full) and the
    /// proxy's settings are not added; `eject_after = 0` adds nothing.
    ///
    /// ```
    /// use loadring_proxy::ClusterConfig;
    ///
    /// let c = ClusterConfig::new("default", "c_murmurhash".parse()?);
    /// assert_eq!(
    ///     c.balancer_policy()?.as_str(),
    ///     "c_murmurhash:eject_after=5 eject_for=30000ms max_eject_for=30000ms max_ejection_percent=100"
    /// );
    /// let own = ClusterConfig::new("default", "c_murmurhash:eject_after=3".parse()?);
    /// assert_eq!(own.balancer_policy()?.as_str(), "c_murmurhash:eject_after=3");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The policy refuses the lifecycle's keys (the message names them).
    pub fn balancer_policy(&self) -> Result<PolicySpec, ConfigError> {
        let health = &self.health;
        if health.eject_after == 0 || self.has_own_ejection() {
            return Ok(self.policy.clone());
        }
        let eject_for = format!("{}ms", health.eject_for.as_millis());
        let keys = [
            ("eject_after", health.eject_after.to_string()),
            ("eject_for", eject_for.clone()),
            ("max_eject_for", eject_for),
            ("max_ejection_percent", "100".to_string()),
        ];
        with_keys(&self.policy, &keys)
    }

    /// Whether the policy sets its own passive ejection (`eject_after=`, at
    /// any level of a locality chain): then [`HealthConfig::eject_after`]
    /// and [`HealthConfig::eject_for`] are not used, and a configuration
    /// that sets them as well is refused where it is read.
    ///
    /// ```
    /// use loadring_proxy::ClusterConfig;
    ///
    /// let own = ClusterConfig::new("default", "zone_first over rr:eject_after=3".parse()?);
    /// assert!(own.has_own_ejection());
    /// assert!(!ClusterConfig::new("default", "rr".parse()?).has_own_ejection());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`HealthConfig::eject_after`]: crate::HealthConfig::eject_after
    /// [`HealthConfig::eject_for`]: crate::HealthConfig::eject_for
    pub fn has_own_ejection(&self) -> bool {
        // Keys and values are single words without `=` or `:` (the spec's
        // grammar), so a parameter is a word that starts with its key.
        self.policy
            .as_str()
            .split([':', ' '])
            .any(|param| param.starts_with("eject_after="))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ClusterConfig;

    /// The proxy's passive ejection is the balancer's lifecycle with the
    /// proxy's rules (docs/proxy.md): `eject_after` failures in a row, any
    /// success resetting the count, eject for `eject_for`, every time the
    /// same (no growth), and no budget (every endpoint may be out). The
    /// health mark is untouched: ejection is the lifecycle's own state.
    #[test]
    fn the_proxys_ejection_is_the_lifecycles_with_a_fixed_time_and_no_budget() {
        use loadring::{Balancer, Endpoint, Outcome, Request};
        let addrs = ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"];
        let eject_for = Duration::from_secs(10);
        let balancer = |policy: &str| {
            let mut c = ClusterConfig::new("default", policy.parse().unwrap());
            c.health.eject_after = 2;
            c.health.eject_for = eject_for;
            let endpoints = addrs.map(|a| Endpoint::new(a).unwrap());
            Balancer::new(c.balancer_policy().unwrap(), endpoints).unwrap()
        };
        // One attempt on `addr` at time `t` (the others excluded).
        let attempt = |b: &Balancer, addr: &str, t: Duration, ok: bool| {
            let others: Vec<&str> = addrs.iter().copied().filter(|a| *a != addr).collect();
            let pick = b.pick(&Request::key("k").excluding(&others).at(t)).unwrap();
            assert_eq!(pick.addr(), addr);
            let latency = Duration::from_millis(1);
            let outcome = if ok {
                Outcome::success(latency)
            } else {
                Outcome::failure(latency)
            };
            pick.finish(outcome.at(t));
        };
        let left =
            |b: &Balancer, addr: &str, t: Duration| b.lifecycle(addr, t).unwrap().ejected_for;
        let t0 = Duration::from_secs(100);

        let b = balancer("c_murmurhash");
        let [a, bb, c] = addrs;
        attempt(&b, a, t0, false);
        attempt(&b, a, t0, true);
        attempt(&b, a, t0, false);
        assert_eq!(left(&b, a, t0), None, "a success resets the count");
        attempt(&b, a, t0, false);
        assert_eq!(left(&b, a, t0), Some(eject_for), "two in a row");
        assert_eq!(b.is_healthy(a), Ok(true), "the health mark is untouched");
        for addr in [bb, c] {
            attempt(&b, addr, t0, false);
            attempt(&b, addr, t0, false);
            assert_eq!(left(&b, addr, t0), Some(eject_for), "{addr}: no budget");
        }
        let back = t0 + eject_for;
        assert_eq!(left(&b, a, back), None, "back after eject_for");
        attempt(&b, a, back, false);
        attempt(&b, a, back, false);
        assert_eq!(left(&b, a, back), Some(eject_for), "the same time again");

        // Under a locality policy, on the policy it wraps.
        let zoned = ClusterConfig::new("default", "zone_first over c_murmurhash".parse().unwrap());
        let spec = zoned.balancer_policy().unwrap();
        assert_eq!(
            spec.as_str(),
            "zone_first over c_murmurhash:eject_after=5 eject_for=30000ms max_eject_for=30000ms max_ejection_percent=100"
        );
        Balancer::new(spec, addrs.map(|a| Endpoint::new(a).unwrap())).unwrap();

        // A policy with its own eject_after= keeps Envoy's growth.
        let own = balancer("c_murmurhash:eject_after=1 eject_for=10s");
        attempt(&own, a, t0, false);
        assert_eq!(left(&own, a, t0), Some(eject_for));
        attempt(&own, a, back, false);
        assert_eq!(
            left(&own, a, back),
            Some(2 * eject_for),
            "Envoy's multiplier"
        );
    }
}
