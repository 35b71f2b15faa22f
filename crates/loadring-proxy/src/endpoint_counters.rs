//! The counters of one endpoint (`loadring_requests_total` per status code,
//! `loadring_load_reports_total` per result), resolved once: each series'
//! counter is fetched from its family the first time the endpoint sees
//! that code or result, then found by index. Counting an attempt costs two
//! atomic loads and one increment: no label hashing, no lock, no reference
//! count.
//!
//! The counters are the families' own (a handle shares its value), so the
//! exposition is the families' as before, series kept when the endpoint
//! leaves.

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::{EncodeLabel, EncodeLabelSet, LabelSetEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::label_value::Escaped;

/// Status codes indexed: `100..=599`, in five classes of 100.
const FIRST_CODE: u16 = 100;
const CLASSES: usize = 5;
/// The results a load report is counted under, in index order.
pub const REPORT_RESULTS: [&str; 3] = ["ok", "malformed", "missing"];

/// The labels of `loadring_requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestLabels {
    /// Only when the series carry a `cluster` label.
    pub cluster: Option<Arc<str>>,
    /// `host:port`.
    pub endpoint: Arc<str>,
    /// The status code (502: no response, 504: timed out).
    pub code: u16,
}

impl EncodeLabelSet for RequestLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if let Some(cluster) = &self.cluster {
            ("cluster", Escaped(cluster)).encode(encoder.encode_label())?;
        }
        ("endpoint", Escaped(&self.endpoint)).encode(encoder.encode_label())?;
        ("code", self.code).encode(encoder.encode_label())
    }
}

/// The labels of `loadring_load_reports_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReportLabels {
    /// Only when the series carry a `cluster` label.
    pub cluster: Option<Arc<str>>,
    /// `host:port`.
    pub endpoint: Arc<str>,
    /// `ok`, `malformed` or `missing`.
    pub result: &'static str,
}

impl EncodeLabelSet for ReportLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        if let Some(cluster) = &self.cluster {
            ("cluster", Escaped(cluster)).encode(encoder.encode_label())?;
        }
        ("endpoint", Escaped(&self.endpoint)).encode(encoder.encode_label())?;
        ("result", self.result).encode(encoder.encode_label())
    }
}

/// One class of status codes: a counter per code, each resolved on first use.
type Class = [OnceLock<Counter>; 100];

/// One endpoint's counters in one cluster.
#[derive(Debug)]
pub struct EndpointCounters {
    requests: Family<RequestLabels, Counter>,
    reports: Family<ReportLabels, Counter>,
    cluster: Option<Arc<str>>,
    endpoint: Arc<str>,
    /// Allocated per class on first use (most endpoints see two or three).
    classes: [OnceLock<Box<Class>>; CLASSES],
    results: [OnceLock<Counter>; REPORT_RESULTS.len()],
}

impl EndpointCounters {
    /// The counters of `endpoint` (of `cluster`, when the series carry a
    /// cluster label) in these families.
    pub fn new(
        requests: Family<RequestLabels, Counter>,
        reports: Family<ReportLabels, Counter>,
        cluster: Option<Arc<str>>,
        endpoint: Arc<str>,
    ) -> Self {
        EndpointCounters {
            requests,
            reports,
            cluster,
            endpoint,
            classes: Default::default(),
            results: Default::default(),
        }
    }

    fn resolve_request(&self, code: u16) -> Counter {
        self.requests.get_or_create_owned(&RequestLabels {
            cluster: self.cluster.clone(),
            endpoint: self.endpoint.clone(),
            code,
        })
    }

    /// Counts an attempt that ended with `code`.
    #[inline]
    pub fn request(&self, code: u16) {
        let index = usize::from(code.wrapping_sub(FIRST_CODE));
        let Some(class) = self.classes.get(index / 100) else {
            // A code hyper accepts beyond 599: rare, looked up.
            self.resolve_request(code).inc();
            return;
        };
        let class = class.get_or_init(|| Box::new(std::array::from_fn(|_| OnceLock::new())));
        class[index % 100]
            .get_or_init(|| self.resolve_request(code))
            .inc();
    }

    /// Counts a load report read with `result` (one of [`REPORT_RESULTS`]).
    #[inline]
    pub fn load_report(&self, result: &'static str) {
        let resolve = || {
            self.reports.get_or_create_owned(&ReportLabels {
                cluster: self.cluster.clone(),
                endpoint: self.endpoint.clone(),
                result,
            })
        };
        match REPORT_RESULTS.iter().position(|r| *r == result) {
            Some(i) => self.results[i].get_or_init(resolve).inc(),
            None => resolve().inc(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters() -> (Family<RequestLabels, Counter>, EndpointCounters) {
        let requests = Family::default();
        let counters = EndpointCounters::new(
            requests.clone(),
            Family::default(),
            None,
            "10.0.0.1:80".into(),
        );
        (requests, counters)
    }

    fn count(family: &Family<RequestLabels, Counter>, code: u16) -> u64 {
        family
            .get_or_create(&RequestLabels {
                cluster: None,
                endpoint: "10.0.0.1:80".into(),
                code,
            })
            .get()
    }

    /// Every code lands in its own series, at the edges of the classes and
    /// beyond them.
    #[test]
    fn each_code_counts_in_its_own_series() {
        let (family, counters) = counters();
        let codes = [
            100, 199, 200, 200, 204, 299, 404, 499, 500, 502, 599, 600, 999,
        ];
        for code in codes {
            counters.request(code);
        }
        for code in [100, 199, 204, 299, 404, 499, 500, 502, 599, 600, 999] {
            assert_eq!(count(&family, code), 1, "code {code}");
        }
        assert_eq!(count(&family, 200), 2);
        assert_eq!(count(&family, 201), 0);
    }
}
