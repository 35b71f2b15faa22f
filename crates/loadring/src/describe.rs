//! How evenly a hashing policy divides the hash space (brpc's Describe).

use crate::endpoint::Endpoint;

/// The division of the hash space among endpoints.
///
/// `share` is the fraction of all hash codes an endpoint owns; its fair share
/// is its weight over the total weight, or an equal part for a policy that
/// gives every endpoint the same part whatever its weight (see
/// [`Layout::weighs`]). `deviation` is the population
/// standard deviation of `share / fair share` over the endpoints of
/// positive weight (0 for a perfect split, 0.1 means about 10% off): with equal weights
/// that is brpc's figure, the deviation of `share * N`; with weights 1 and 3,
/// shares of 25% and 75% are a perfect split.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    shares: Vec<(Endpoint, f64)>,
    entries: usize,
    entry_label: &'static str,
    /// Whether the policy sizes each endpoint's part by its weight.
    weighs: bool,
}

impl Layout {
    pub(crate) fn new(
        endpoints: &[Endpoint],
        shares: Vec<f64>,
        entries: usize,
        entry_label: &'static str,
    ) -> Self {
        let shares = endpoints.iter().cloned().zip(shares).collect();
        Layout {
            shares,
            entries,
            entry_label,
            weighs: true,
        }
    }

    /// The layout of a policy that weighs endpoints (`true`, as
    /// [`Layout::new`] assumes) or not.
    pub(crate) fn weighing(mut self, weighs: bool) -> Self {
        self.weighs = weighs;
        self
    }

    /// Each endpoint with its share of the hash space (the shares sum to 1).
    pub fn shares(&self) -> &[(Endpoint, f64)] {
        &self.shares
    }

    /// Number of ring points or table slots.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// What the entries are: `"points"` for rings, `"slots"` for tables.
    pub fn entry_label(&self) -> &'static str {
        self.entry_label
    }

    /// Whether the policy sizes each endpoint's part of the hash space by
    /// its weight. `false` for the policies whose placement gives every
    /// endpoint of weight >= 1 as many points whatever its weight (`dubbo`,
    /// `pixiu_ring`, `ketama:weighted=false`): weight 0 still drains an
    /// endpoint there, and any other weight only sets its cap under a load
    /// bound. [`Layout::fair_shares`] is then an equal part each.
    ///
    /// ```
    /// use loadring::{Balancer, Endpoint};
    ///
    /// let endpoints = || -> Result<Vec<Endpoint>, loadring::Error> {
    ///     Ok(vec![Endpoint::new("a:80")?, Endpoint::new("b:80")?.with_weight(3)])
    /// };
    /// let layout = |spec: &str| -> Result<loadring::Layout, loadring::Error> {
    ///     let balancer = Balancer::new(spec.parse()?, endpoints()?)?;
    ///     Ok(balancer.layout()?.expect("a hashing policy"))
    /// };
    /// // brpc's ring gives weight 3 three times the points of weight 1...
    /// let brpc = layout("c_murmurhash")?;
    /// assert!(brpc.weighs());
    /// assert_eq!(brpc.fair_shares(), [0.25, 0.75]);
    /// // ...Dubbo's gives each endpoint 160 points (its default) whatever its weight.
    /// let dubbo = layout("dubbo")?;
    /// assert!(!dubbo.weighs());
    /// assert_eq!(dubbo.fair_shares(), [0.5, 0.5]);
    /// # Ok::<(), loadring::Error>(())
    /// ```
    pub fn weighs(&self) -> bool {
        self.weighs
    }

    /// Each endpoint's fair share: its weight over the total weight; for a
    /// policy that does not weigh endpoints ([`Layout::weighs`]), an equal
    /// part for each endpoint of weight >= 1. Weight 0 is owed nothing.
    pub fn fair_shares(&self) -> Vec<f64> {
        let weight = |e: &Endpoint| match (self.weighs, e.weight()) {
            (false, w) => f64::from(u8::from(w > 0)),
            (true, w) => f64::from(w),
        };
        let total: f64 = self.shares.iter().map(|(e, _)| weight(e)).sum();
        self.shares
            .iter()
            .map(|(e, _)| if total > 0.0 { weight(e) / total } else { 0.0 })
            .collect()
    }

    /// Each endpoint's share over its fair share (1.0 is exactly fair);
    /// `None` for endpoints of weight 0, which are owed nothing.
    pub fn share_over_fair(&self) -> Vec<Option<f64>> {
        self.shares
            .iter()
            .zip(self.fair_shares())
            .map(|((_, share), fair)| (fair > 0.0).then(|| share / fair))
            .collect()
    }

    /// The endpoints of weight >= 1 whose share is 0: the policy's
    /// arithmetic gives them no point or slot (e.g. libmemcached's ketama
    /// gives a weight-1 server beside two of weight 1000 no point), so no
    /// key reaches them.
    pub fn unreached(&self) -> impl Iterator<Item = &Endpoint> {
        self.shares
            .iter()
            .filter(|(e, share)| e.weight() > 0 && *share == 0.0)
            .map(|(e, _)| e)
    }

    /// Population standard deviation of `share / fair share` over the
    /// endpoints of weight >= 1 (`share * N` for equal weights).
    pub fn deviation(&self) -> f64 {
        let ratios: Vec<f64> = self.share_over_fair().into_iter().flatten().collect();
        if ratios.is_empty() {
            return 0.0;
        }
        let n = ratios.len() as f64;
        let mean = ratios.iter().sum::<f64>() / n;
        (ratios.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n).sqrt()
    }

    /// The largest `share / fair share` (1.0 is a perfect split; `share * N`
    /// for equal weights).
    pub fn max_over_mean(&self) -> f64 {
        self.share_over_fair()
            .into_iter()
            .flatten()
            .fold(0.0, f64::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deviation_is_the_population_std_dev_of_scaled_shares() {
        let eps: Vec<Endpoint> = ["a", "b"]
            .iter()
            .map(|a| Endpoint::new(*a).unwrap())
            .collect();
        let layout = Layout::new(&eps, vec![0.75, 0.25], 10, "points");
        // scaled shares 1.5 and 0.5: mean 1, deviation 0.5
        assert!((layout.deviation() - 0.5).abs() < 1e-12);
        assert!((layout.max_over_mean() - 1.5).abs() < 1e-12);
    }

    fn weighted(weights: &[u32]) -> Vec<Endpoint> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Endpoint::new(format!("e{i}")).unwrap().with_weight(w))
            .collect()
    }

    #[test]
    fn deviation_compares_each_share_with_its_weight() {
        // Weights 1 and 3 split 25/75: exactly fair.
        let fair = Layout::new(&weighted(&[1, 3]), vec![0.25, 0.75], 10, "points");
        assert_eq!(fair.deviation(), 0.0);
        assert_eq!(fair.max_over_mean(), 1.0);
        // Weights 1 and 3 split 50/50: ratios 2 and 2/3, mean 4/3, deviation 2/3.
        let even = Layout::new(&weighted(&[1, 3]), vec![0.5, 0.5], 10, "points");
        assert!((even.deviation() - 2.0 / 3.0).abs() < 1e-12);
        assert!((even.max_over_mean() - 2.0).abs() < 1e-12);
        // Weight 0 is owed nothing and left out: weights 0, 1, 1 split 0/50/50.
        let zero = Layout::new(&weighted(&[0, 1, 1]), vec![0.0, 0.5, 0.5], 10, "points");
        assert_eq!(zero.deviation(), 0.0);
        assert_eq!(zero.share_over_fair(), [None, Some(1.0), Some(1.0)]);
    }

    #[test]
    fn a_layout_that_does_not_weigh_owes_equal_parts() {
        // Weights 0, 1, 3 where weights are ignored: 0, 1/2, 1/2.
        let layout =
            Layout::new(&weighted(&[0, 1, 3]), vec![0.0, 0.25, 0.75], 10, "points").weighing(false);
        assert!(!layout.weighs());
        assert_eq!(layout.fair_shares(), [0.0, 0.5, 0.5]);
        assert_eq!(layout.share_over_fair(), [None, Some(0.5), Some(1.5)]);
        // Ratios 0.5 and 1.5: mean 1, deviation 0.5.
        assert_eq!(layout.deviation(), 0.5);
        assert_eq!(layout.max_over_mean(), 1.5);
        // The same shares weighed: 0, 1/4, 3/4, a perfect split.
        let weighed = Layout::new(&weighted(&[0, 1, 3]), vec![0.0, 0.25, 0.75], 10, "points");
        assert!(weighed.weighs());
        assert_eq!(weighed.fair_shares(), [0.0, 0.25, 0.75]);
        assert_eq!(weighed.deviation(), 0.0);
    }

    #[test]
    fn nothing_is_owed_when_no_endpoint_has_weight() {
        let layout = Layout::new(&weighted(&[0, 0]), vec![0.0, 0.0], 10, "points");
        assert_eq!(layout.fair_shares(), [0.0, 0.0]);
        assert_eq!(layout.share_over_fair(), [None, None]);
        assert_eq!(layout.deviation(), 0.0);
    }

    #[test]
    fn endpoints_of_weight_without_a_share_are_unreached() {
        let layout = Layout::new(&weighted(&[0, 1, 1000]), vec![0.0, 0.0, 1.0], 10, "points");
        let unreached: Vec<&str> = layout.unreached().map(Endpoint::addr).collect();
        assert_eq!(unreached, ["e1"]);
    }
}
