//! Backends' own load reports: `--load-report orca[:METRIC]` reads ORCA's
//! `endpoint-load-metrics` header on every response and hands the count of
//! requests in service to the balancer with the pick's outcome.
//!
//! The header is removed before the response goes on to the client when
//! reports are read (it is meant for the balancer); without
//! `--load-report` the proxy does not look at it and passes it through like
//! any other header. Each response is counted in
//! `loadring_load_reports_total{endpoint,result}`: `ok` (a report was
//! used), `malformed` (the header was there but could not be read; that
//! response's report is ignored) or `missing` (no header).

use std::fmt;
use std::str::FromStr;

use http::HeaderMap;
use loadring::orca;

use crate::error::{ConfigError, ConfigErrorKind};

/// The metric read when `--load-report orca` names none.
pub const DEFAULT_METRIC: &str = "in_flight";

/// Where reported load comes from: ORCA's header, one named metric of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReportSpec {
    metric: String,
}

impl LoadReportSpec {
    /// ORCA's header, named metric `metric`.
    ///
    /// # Errors
    /// A metric name ORCA's parser does not accept.
    pub fn orca(metric: &str) -> Result<Self, ConfigError> {
        orca::check_metric(metric)
            .map_err(|e| ConfigError::new(ConfigErrorKind::Value, e.to_string()))?;
        Ok(LoadReportSpec {
            metric: metric.to_string(),
        })
    }

    /// The named metric that holds the backend's requests in service.
    pub fn metric(&self) -> &str {
        &self.metric
    }

    /// Reads (and removes) the report in `headers`.
    pub fn take(&self, headers: &mut HeaderMap) -> Reading {
        let mut values = headers.get_all(orca::HEADER).iter();
        let Some(first) = values.next() else {
            return Reading::Missing;
        };
        let reading = if values.next().is_some() {
            // Several lines of one report cannot be told apart from two
            // reports (and a JSON report cannot be split): refused.
            Reading::Malformed(format!("{} given more than once", orca::HEADER))
        } else {
            match first.to_str() {
                Err(_) => Reading::Malformed(format!("{}: not visible ASCII", orca::HEADER)),
                Ok(text) => match orca::in_service(text, &self.metric) {
                    Ok(count) => Reading::InService(count),
                    Err(e) => Reading::Malformed(e.to_string()),
                },
            }
        };
        headers.remove(orca::HEADER);
        reading
    }
}

/// What a response's headers held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// The backend's requests in service.
    InService(u64),
    /// No header.
    Missing,
    /// A header that could not be read, and why.
    Malformed(String),
}

impl Reading {
    /// The `result` label of `loadring_load_reports_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Reading::InService(_) => "ok",
            Reading::Missing => "missing",
            Reading::Malformed(_) => "malformed",
        }
    }
}

impl fmt::Display for LoadReportSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "orca:{}", self.metric)
    }
}

impl FromStr for LoadReportSpec {
    type Err = ConfigError;

    /// `orca` or `orca:METRIC`.
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        match text.split_once(':') {
            None if text == "orca" => LoadReportSpec::orca(DEFAULT_METRIC),
            Some(("orca", metric)) => LoadReportSpec::orca(metric),
            _ => Err(ConfigError::new(
                ConfigErrorKind::Value,
                format!(
                    "`{}` is not a load report source: accepted orca or orca:METRIC",
                    text.escape_debug()
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn specs_read_and_print() {
        let spec: LoadReportSpec = "orca".parse().unwrap();
        assert_eq!(spec.metric(), "in_flight");
        assert_eq!(spec.to_string(), "orca:in_flight");
        let spec: LoadReportSpec = "orca:num_requests_running".parse().unwrap();
        assert_eq!(spec.metric(), "num_requests_running");
        // A metric with a colon keeps it.
        let spec: LoadReportSpec = "orca:vllm:num_requests_running".parse().unwrap();
        assert_eq!(spec.metric(), "vllm:num_requests_running");
        assert_eq!(spec.to_string().parse::<LoadReportSpec>(), Ok(spec));
    }

    #[test]
    fn bad_specs_name_the_culprit() {
        assert_eq!(
            "ORCA".parse::<LoadReportSpec>().unwrap_err().to_string(),
            "`ORCA` is not a load report source: accepted orca or orca:METRIC"
        );
        assert_eq!(
            "prometheus:x"
                .parse::<LoadReportSpec>()
                .unwrap_err()
                .to_string(),
            "`prometheus:x` is not a load report source: accepted orca or orca:METRIC"
        );
        for bad in ["orca:", "orca:in flight", "orca:a,b"] {
            let err = bad.parse::<LoadReportSpec>().unwrap_err().to_string();
            assert!(err.starts_with("metric `"), "{bad}: {err}");
            assert!(err.contains("accepted"), "{bad}: {err}");
        }
    }

    #[test]
    fn reports_are_read_and_removed() {
        let spec: LoadReportSpec = "orca".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "endpoint-load-metrics",
            HeaderValue::from_static("TEXT named_metrics.in_flight=3"),
        );
        headers.insert("x-other", HeaderValue::from_static("kept"));
        assert_eq!(spec.take(&mut headers), Reading::InService(3));
        assert!(!headers.contains_key("endpoint-load-metrics"));
        assert!(headers.contains_key("x-other"));
        assert_eq!(spec.take(&mut headers), Reading::Missing);

        headers.insert(
            "endpoint-load-metrics",
            HeaderValue::from_static("TEXT named_metrics.in_flight=NaN"),
        );
        let reading = spec.take(&mut headers);
        assert_eq!(reading.label(), "malformed");
        assert!(!headers.contains_key("endpoint-load-metrics"));

        headers.append(
            "endpoint-load-metrics",
            HeaderValue::from_static("TEXT named_metrics.in_flight=1"),
        );
        headers.append(
            "endpoint-load-metrics",
            HeaderValue::from_static("TEXT named_metrics.in_flight=2"),
        );
        assert_eq!(
            spec.take(&mut headers),
            Reading::Malformed("endpoint-load-metrics given more than once".into())
        );
        assert!(!headers.contains_key("endpoint-load-metrics"));

        headers.insert(
            "endpoint-load-metrics",
            HeaderValue::from_bytes(b"TEXT named_metrics.in_flight=\xff").unwrap(),
        );
        assert_eq!(spec.take(&mut headers).label(), "malformed");
    }
}
