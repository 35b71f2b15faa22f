//! ORCA's `endpoint-load-metrics` response header: a backend's own count of
//! its requests in service.
//!
//! Backends that speak ORCA (gRPC's and Envoy's per-request load reports;
//! vLLM emits one with `num_requests_running`) attach a load report to each
//! response. [`in_service`] reads one named metric from it, for
//! [`LoadReport::new`](crate::LoadReport::new).
//!
//! Two formats are read, told apart by their prefix:
//!
//! - `TEXT`: comma-separated `name=value` fields (`name:value` is accepted
//!   too): `TEXT named_metrics.in_flight=12, cpu_utilization=0.3`. Space
//!   and tabs around fields, names and values are ignored; empty fields
//!   (`a=1,,b=2`) are skipped. A field splits at its first `=`, or without
//!   one at its first `:`: a metric whose name holds `:` needs the `=` form.
//! - `JSON`: the JSON form of ORCA's load report, field names in snake case
//!   or lower camel case: `JSON {"named_metrics": {"in_flight": 12},
//!   "cpu_utilization": 0.3}`. A number may be written as a JSON string
//!   (`"12"`), as protobuf's JSON mapping allows.
//!
//! The metric is a *named* metric (`in_flight` reads `named_metrics.in_flight`).
//! The standard fields (`cpu_utilization`, `mem_utilization`,
//! `application_utilization`, `rps_fractional`, `eps`) and the maps
//! (`named_metrics.X`, `request_cost.X`, `utilization.X`) are checked, so a
//! header that is malformed anywhere is refused; fields of any other name
//! are ignored, so backends may send fields this version does not know.
//!
//! What is refused (each an [`OrcaError`], never a panic): a missing or
//! unknown format prefix (`BIN`, the base64 protobuf form, is not read), a
//! field without a value, a value that is not a number, NaN or infinite,
//! a field named twice (the same rule as Envoy's), a header without the
//! metric, and for the metric itself a negative value or one above
//! [`MAX_IN_SERVICE`]. A header longer than [`MAX_HEADER_LEN`] bytes is
//! refused before it is read, which bounds the time spent on one response.
//!
//! A fractional metric (a backend that averages, `12.4`) is rounded to the
//! nearest whole request (`12`; halves round away from zero): requests in
//! service are a count, and rounding keeps a report that is near a count
//! instead of dropping it.
//!
//! ```
//! use loadring::orca;
//!
//! assert_eq!(orca::in_service("TEXT named_metrics.in_flight=12, cpu_utilization=0.3", "in_flight")?, 12);
//! assert_eq!(orca::in_service(r#"JSON {"named_metrics": {"num_requests_running": 3}}"#, "num_requests_running")?, 3);
//!
//! let err = orca::in_service("TEXT named_metrics.in_flight=-1", "in_flight").unwrap_err();
//! assert_eq!(err.kind(), orca::OrcaErrorKind::OutOfRange);
//! assert_eq!(err.to_string(), "endpoint-load-metrics: named_metrics.in_flight=-1 is out of range: accepted 0..=4294967295");
//! # Ok::<(), orca::OrcaError>(())
//! ```

use std::collections::HashSet;
use std::fmt;

use crate::echo::Echo;

/// The largest count of requests in service a report may give.
pub const MAX_IN_SERVICE: u64 = u32::MAX as u64;

/// The longest header value read, in bytes.
pub const MAX_HEADER_LEN: usize = 16 * 1024;

/// How deep JSON values may nest (ORCA's report needs 2 levels; the rest
/// is room for unknown fields, bounded so a hostile header cannot recurse).
const MAX_JSON_DEPTH: usize = 16;

/// The header's name.
pub const HEADER: &str = "endpoint-load-metrics";

/// What kind of [`OrcaError`] it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OrcaErrorKind {
    /// The value does not start with `TEXT ` or `JSON ` (`BIN` included: the
    /// binary form is not read).
    Format,
    /// The value is longer than [`MAX_HEADER_LEN`].
    TooLong,
    /// A field or the JSON is not well formed.
    Syntax,
    /// A value is not a number, or is NaN or infinite.
    Number,
    /// A field is given twice.
    Duplicate,
    /// The metric is negative or above [`MAX_IN_SERVICE`].
    OutOfRange,
    /// The header does not carry the metric.
    Missing,
    /// The metric's name itself is not acceptable (see [`check_metric`]).
    Metric,
}

/// A load report header, or a metric name, that could not be read.
///
/// [`OrcaError::kind`] says what went wrong; the message is one line that
/// quotes the culprit (cut to 40 characters, with its length).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrcaError {
    kind: OrcaErrorKind,
    message: String,
}

impl OrcaError {
    fn new(kind: OrcaErrorKind, message: String) -> Self {
        OrcaError { kind, message }
    }

    /// What kind of error it is.
    pub fn kind(&self) -> OrcaErrorKind {
        self.kind
    }
}

impl fmt::Display for OrcaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OrcaError {}

fn error(kind: OrcaErrorKind, what: String) -> OrcaError {
    OrcaError::new(kind, format!("{HEADER}: {what}"))
}

/// Checks that `metric` can name a named metric: 1 to 128 characters of
/// letters, digits, `_`, `-`, `.` and `:` (vLLM's names, Prometheus-style
/// names).
///
/// ```
/// assert!(loadring::orca::check_metric("num_requests_running").is_ok());
/// assert!(loadring::orca::check_metric("in flight").is_err());
/// ```
///
/// # Errors
/// [`OrcaErrorKind::Metric`], naming the metric and what is accepted.
pub fn check_metric(metric: &str) -> Result<(), OrcaError> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if metric.is_empty() || metric.len() > 128 || !metric.chars().all(fine) {
        return Err(OrcaError::new(
            OrcaErrorKind::Metric,
            format!(
                "metric `{}` is not a metric name: accepted 1 to 128 of A-Z a-z 0-9 _ - . :",
                Echo(metric)
            ),
        ));
    }
    Ok(())
}

/// Reads the named metric `metric` from an `endpoint-load-metrics` header
/// value, as a count of requests in service.
///
/// # Errors
/// See the [module documentation](self) for what is refused; every error is
/// an [`OrcaError`] whose message names the culprit.
pub fn in_service(header_value: &str, metric: &str) -> Result<u64, OrcaError> {
    check_metric(metric)?;
    if header_value.len() > MAX_HEADER_LEN {
        return Err(error(
            OrcaErrorKind::TooLong,
            format!(
                "{} bytes is too long: accepted up to {MAX_HEADER_LEN}",
                header_value.len()
            ),
        ));
    }
    let value = header_value.trim_matches(is_space);
    let value = if let Some(rest) = strip_format(value, "TEXT") {
        text(rest, metric)?
    } else if let Some(rest) = strip_format(value, "JSON") {
        json(rest, metric)?
    } else {
        let prefix: String = value.chars().take_while(|c| !is_space(*c)).collect();
        return Err(error(
            OrcaErrorKind::Format,
            format!(
                "format `{}` is not read: accepted TEXT and JSON",
                Echo(&prefix)
            ),
        ));
    };
    let Some(value) = value else {
        return Err(error(
            OrcaErrorKind::Missing,
            format!("no named_metrics.{metric} in the report"),
        ));
    };
    count(metric, value)
}

/// The metric's value and its text as written (for messages).
type Found = Option<(f64, String)>;

fn is_space(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// The rest of `value` after `format` and the blank that must follow it
/// (a bare `TEXT` is an empty report).
fn strip_format<'v>(value: &'v str, format: &str) -> Option<&'v str> {
    let rest = value.strip_prefix(format)?;
    if rest.is_empty() {
        return Some(rest);
    }
    rest.starts_with(is_space).then_some(rest)
}

/// The metric's value as a count: rounded, refused when negative or huge.
fn count(metric: &str, (value, written): (f64, String)) -> Result<u64, OrcaError> {
    let rounded = value.round();
    // -0.4 rounds to -0: a negative report is refused before rounding.
    if value < 0.0 || rounded > MAX_IN_SERVICE as f64 {
        return Err(error(
            OrcaErrorKind::OutOfRange,
            format!(
                "named_metrics.{metric}={} is out of range: accepted 0..={MAX_IN_SERVICE}",
                Echo(&written)
            ),
        ));
    }
    // In range and whole: the cast is exact.
    Ok(rounded as u64)
}

fn number(name: &str, text: &str) -> Result<f64, OrcaError> {
    let value: f64 = text.parse().map_err(|_| {
        error(
            OrcaErrorKind::Number,
            format!("{}={} is not a number", Echo(name), Echo(text)),
        )
    })?;
    if !value.is_finite() {
        return Err(error(
            OrcaErrorKind::Number,
            format!("{}={} is not a finite number", Echo(name), Echo(text)),
        ));
    }
    Ok(value)
}

/// Whether `name` is a field ORCA's report defines (checked, not ignored).
fn known(name: &str) -> bool {
    matches!(
        name,
        "cpu_utilization"
            | "mem_utilization"
            | "application_utilization"
            | "rps_fractional"
            | "eps"
    ) || ["named_metrics.", "request_cost.", "utilization."]
        .iter()
        .any(|map| name.strip_prefix(map).is_some_and(|key| !key.is_empty()))
}

fn text(fields: &str, metric: &str) -> Result<Found, OrcaError> {
    let mut seen = HashSet::new();
    let mut found = None;
    for field in fields.split(',') {
        let field = field.trim_matches(is_space);
        if field.is_empty() {
            continue;
        }
        // `=` first: a metric's name may hold `:` (`vllm:num_requests_running`).
        let Some(at) = field.find('=').or_else(|| field.find(':')) else {
            return Err(error(
                OrcaErrorKind::Syntax,
                format!("field `{}` has no value: accepted NAME=VALUE", Echo(field)),
            ));
        };
        let name = field[..at].trim_matches(is_space);
        let value = field[at + 1..].trim_matches(is_space);
        if name.is_empty() || value.is_empty() {
            return Err(error(
                OrcaErrorKind::Syntax,
                format!(
                    "field `{}` needs a name and a value: accepted NAME=VALUE",
                    Echo(field)
                ),
            ));
        }
        if !seen.insert(name) {
            return Err(error(
                OrcaErrorKind::Duplicate,
                format!("field {} is given twice", Echo(name)),
            ));
        }
        let is_metric = name
            .strip_prefix("named_metrics.")
            .is_some_and(|key| key == metric);
        if is_metric {
            found = Some((number(name, value)?, value.to_string()));
        } else if known(name) {
            number(name, value)?;
        }
    }
    Ok(found)
}

fn json(text: &str, metric: &str) -> Result<Found, OrcaError> {
    let mut parser = Json {
        text: text.as_bytes(),
        at: 0,
    };
    parser.blank();
    let mut found = None;
    let mut seen = HashSet::new();
    parser.object(|parser, key| {
        let field = match key.as_str() {
            "namedMetrics" => "named_metrics",
            "requestCost" => "request_cost",
            "cpuUtilization" => "cpu_utilization",
            "memUtilization" => "mem_utilization",
            "applicationUtilization" => "application_utilization",
            "rpsFractional" => "rps_fractional",
            other => other,
        }
        .to_string();
        if !seen.insert(field.clone()) {
            return Err(error(
                OrcaErrorKind::Duplicate,
                format!("field {} is given twice", Echo(&key)),
            ));
        }
        match field.as_str() {
            "named_metrics" | "request_cost" | "utilization" => {
                let mut names = HashSet::new();
                parser.object(|parser, name| {
                    if !names.insert(name.clone()) {
                        return Err(error(
                            OrcaErrorKind::Duplicate,
                            format!("field {field}.{} is given twice", Echo(&name)),
                        ));
                    }
                    parser.blank();
                    let start = parser.at;
                    let value = parser.number(&format!("{field}.{name}"))?;
                    if field == "named_metrics" && name == metric {
                        let written = String::from_utf8_lossy(&parser.text[start..parser.at]);
                        found = Some((value, written.into_owned()));
                    }
                    Ok(())
                })
            }
            _ if known(&field) => parser.number(&field).map(drop),
            _ => parser.skip(1),
        }
    })?;
    parser.blank();
    if parser.at != parser.text.len() {
        return Err(parser.syntax("text after the JSON object"));
    }
    Ok(found)
}

/// Just enough of a JSON reader for a load report: objects, numbers
/// (plain or quoted), and skipping anything else.
struct Json<'t> {
    text: &'t [u8],
    at: usize,
}

impl Json<'_> {
    fn syntax(&self, what: &str) -> OrcaError {
        let rest = String::from_utf8_lossy(&self.text[self.at.min(self.text.len())..]);
        let near = if rest.is_empty() {
            "the end".to_string()
        } else {
            format!("`{}`", Echo(&rest))
        };
        error(
            OrcaErrorKind::Syntax,
            format!("JSON: {what} at byte {} (near {near})", self.at),
        )
    }

    fn blank(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.blank();
        if self.text.get(self.at) == Some(&byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), OrcaError> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.syntax(&format!("expected `{}`", byte as char)))
        }
    }

    /// An object, calling `member` with each key once the reader is at its value.
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, String) -> Result<(), OrcaError>,
    ) -> Result<(), OrcaError> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Ok(());
        }
        loop {
            self.blank();
            let key = self.string()?;
            self.expect(b':')?;
            self.blank();
            member(self, key)?;
            if self.eat(b'}') {
                return Ok(());
            }
            self.expect(b',')?;
        }
    }

    fn string(&mut self) -> Result<String, OrcaError> {
        if self.text.get(self.at) != Some(&b'"') {
            return Err(self.syntax("expected a string"));
        }
        let start = self.at;
        self.at += 1;
        let mut out = Vec::new();
        loop {
            match self.text.get(self.at) {
                None => {
                    self.at = start;
                    return Err(self.syntax("unterminated string"));
                }
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => {
                    let escaped = match self.text.get(self.at + 1) {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => {
                            let hex = self
                                .text
                                .get(self.at + 2..self.at + 6)
                                .and_then(|h| std::str::from_utf8(h).ok())
                                // Four hex digits: `from_str_radix` alone
                                // also takes a sign (`\u+041`).
                                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32);
                            // Surrogate pairs are not needed for metric names: refused.
                            let Some(c) = hex else {
                                return Err(self.syntax("bad \\u escape"));
                            };
                            self.at += 4;
                            c
                        }
                        _ => return Err(self.syntax("bad escape")),
                    };
                    self.at += 2;
                    let mut buf = [0; 4];
                    out.extend_from_slice(escaped.encode_utf8(&mut buf).as_bytes());
                }
                Some(&byte) if byte < 0x20 => {
                    return Err(self.syntax("control character in a string"));
                }
                Some(&byte) => {
                    out.push(byte);
                    self.at += 1;
                }
            }
        }
        // The input is a &str and escapes produce whole characters.
        String::from_utf8(out).map_err(|_| self.syntax("string is not UTF-8"))
    }

    /// A number, or a string that holds one (protobuf's JSON mapping).
    fn number(&mut self, name: &str) -> Result<f64, OrcaError> {
        self.blank();
        if self.text.get(self.at) == Some(&b'"') {
            let text = self.string()?;
            return number(name, text.trim_matches(is_space));
        }
        let start = self.at;
        while let Some(b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') = self.text.get(self.at) {
            self.at += 1;
        }
        if start == self.at {
            return Err(error(
                OrcaErrorKind::Number,
                format!(
                    "{} is not a number (near `{}`)",
                    Echo(name),
                    Echo(&String::from_utf8_lossy(&self.text[start..]))
                ),
            ));
        }
        // Only ASCII bytes were taken.
        let text = std::str::from_utf8(&self.text[start..self.at]).unwrap_or("");
        number(name, text)
    }

    /// Skips a value of a field this reader does not know.
    fn skip(&mut self, depth: usize) -> Result<(), OrcaError> {
        if depth > MAX_JSON_DEPTH {
            return Err(self.syntax(&format!("nested deeper than {MAX_JSON_DEPTH}")));
        }
        self.blank();
        match self.text.get(self.at) {
            Some(b'{') => self.object(|parser, _| parser.skip(depth + 1)),
            Some(b'[') => {
                self.at += 1;
                if self.eat(b']') {
                    return Ok(());
                }
                loop {
                    self.skip(depth + 1)?;
                    if self.eat(b']') {
                        return Ok(());
                    }
                    self.expect(b',')?;
                }
            }
            Some(b'"') => self.string().map(drop),
            _ => {
                for word in ["true", "false", "null"] {
                    if self.text[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(());
                    }
                }
                self.number("value").map(drop)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(header: &str) -> Result<u64, OrcaError> {
        in_service(header, "in_flight")
    }

    fn kind(header: &str) -> OrcaErrorKind {
        match read(header) {
            Ok(n) => panic!("{header:?} was read as {n}"),
            Err(e) => {
                let message = e.to_string();
                assert!(!message.contains('\n'), "{message}");
                assert!(message.len() < 300, "{message}");
                e.kind()
            }
        }
    }

    #[test]
    fn text_reads_the_named_metric() {
        assert_eq!(
            read("TEXT named_metrics.in_flight=12, cpu_utilization=0.3"),
            Ok(12)
        );
        assert_eq!(
            read("TEXT cpu_utilization=0.3,named_metrics.in_flight=7"),
            Ok(7)
        );
        // Envoy's older separator.
        assert_eq!(read("TEXT named_metrics.in_flight:5,eps:2"), Ok(5));
        // A name with `:` splits at `=`.
        let vllm = "TEXT named_metrics.vllm:num_requests_running=4";
        assert_eq!(in_service(vllm, "vllm:num_requests_running"), Ok(4));
        assert_eq!(read("TEXT named_metrics.in_flight=0"), Ok(0));
        assert_eq!(
            in_service(
                "TEXT named_metrics.num_requests_running=3,named_metrics.num_requests_waiting=9",
                "num_requests_running"
            ),
            Ok(3)
        );
        assert_eq!(
            in_service(
                "TEXT named_metrics.num_requests_running=3,named_metrics.num_requests_waiting=9",
                "num_requests_waiting"
            ),
            Ok(9)
        );
    }

    #[test]
    fn text_tolerates_blanks_and_empty_fields() {
        assert_eq!(
            read("  TEXT \t named_metrics.in_flight = 12 ,\tcpu_utilization= 0.3\t "),
            Ok(12)
        );
        assert_eq!(read("TEXT ,, named_metrics.in_flight=4,,"), Ok(4));
    }

    #[test]
    fn every_standard_field_is_checked() {
        let fields = [
            "cpu_utilization=0.5",
            "mem_utilization=0.5",
            "application_utilization=0.5",
            "rps_fractional=100",
            "eps=1.5",
            "request_cost.db=3",
            "utilization.gpu=0.9",
            "named_metrics.other=1",
        ];
        let all = fields.join(",");
        assert_eq!(
            read(&format!("TEXT {all},named_metrics.in_flight=2")),
            Ok(2)
        );
        for field in fields {
            let (name, _) = field.split_once('=').unwrap();
            let bad = format!("TEXT named_metrics.in_flight=2,{name}=x");
            assert_eq!(kind(&bad), OrcaErrorKind::Number, "{bad}");
            let nan = format!("TEXT named_metrics.in_flight=2,{name}=NaN");
            assert_eq!(kind(&nan), OrcaErrorKind::Number, "{nan}");
        }
    }

    #[test]
    fn unknown_fields_are_ignored() {
        assert_eq!(
            read("TEXT future_field=abc,named_metrics.in_flight=3"),
            Ok(3)
        );
        assert_eq!(
            read("TEXT request_cost.=1,named_metrics.in_flight=3"),
            Ok(3)
        );
        assert_eq!(
            read(
                r#"JSON {"future": {"a": [1, "x", true, null, {"b": []}]}, "named_metrics": {"in_flight": 3}}"#
            ),
            Ok(3)
        );
    }

    #[test]
    fn json_reads_the_named_metric() {
        assert_eq!(
            read(r#"JSON {"named_metrics": {"in_flight": 12}, "cpu_utilization": 0.3}"#),
            Ok(12)
        );
        assert_eq!(
            read(r#"JSON {"cpuUtilization":0.3,"namedMetrics":{"x":1,"in_flight":8}}"#),
            Ok(8)
        );
        assert_eq!(read(r#"JSON {"named_metrics": {"in_flight": "6"}}"#), Ok(6));
        assert_eq!(
            read("JSON\t{ \"named_metrics\" :\n{ \"in_flight\" : 1e1 } }  "),
            Ok(10)
        );
        assert_eq!(
            read(r#"JSON {"named_metrics": {"in_\u0066light": 2}}"#),
            Ok(2)
        );
        assert_eq!(
            read(
                r#"JSON {"requestCost": {"a": 1}, "utilization": {"b": 0.2}, "eps": 3, "named_metrics": {"in_flight": 1}}"#
            ),
            Ok(1)
        );
    }

    #[test]
    fn a_missing_metric_is_an_error() {
        assert_eq!(kind("TEXT cpu_utilization=0.3"), OrcaErrorKind::Missing);
        assert_eq!(kind("TEXT"), OrcaErrorKind::Missing);
        assert_eq!(
            kind("TEXT named_metrics.in_flight_x=3"),
            OrcaErrorKind::Missing
        );
        assert_eq!(kind("TEXT in_flight=3"), OrcaErrorKind::Missing);
        assert_eq!(kind(r#"JSON {}"#), OrcaErrorKind::Missing);
        assert_eq!(
            kind(r#"JSON {"named_metrics": {}}"#),
            OrcaErrorKind::Missing
        );
        assert_eq!(kind(r#"JSON {"in_flight": 3}"#), OrcaErrorKind::Missing);
        assert_eq!(
            read("TEXT cpu_utilization=0.3").unwrap_err().to_string(),
            "endpoint-load-metrics: no named_metrics.in_flight in the report"
        );
    }

    #[test]
    fn formats_other_than_text_and_json_are_refused() {
        for header in [
            "",
            "BIN abcd",
            "text named_metrics.in_flight=1",
            "TEXTnamed_metrics.in_flight=1",
            "named_metrics.in_flight=1",
            "XML <a/>",
        ] {
            assert_eq!(kind(header), OrcaErrorKind::Format, "{header:?}");
        }
        assert_eq!(
            read("BIN AAAA").unwrap_err().to_string(),
            "endpoint-load-metrics: format `BIN` is not read: accepted TEXT and JSON"
        );
    }

    #[test]
    fn malformed_fields_are_refused() {
        assert_eq!(kind("TEXT named_metrics.in_flight"), OrcaErrorKind::Syntax);
        assert_eq!(kind("TEXT named_metrics.in_flight="), OrcaErrorKind::Syntax);
        assert_eq!(kind("TEXT =3"), OrcaErrorKind::Syntax);
        assert_eq!(
            kind("TEXT named_metrics.in_flight=twelve"),
            OrcaErrorKind::Number
        );
        assert_eq!(
            kind("TEXT named_metrics.in_flight=\"12\""),
            OrcaErrorKind::Number
        );
        assert_eq!(
            kind("TEXT named_metrics.in_flight=1 2"),
            OrcaErrorKind::Number
        );
        for json in [
            r#"JSON"#,
            r#"JSON {"#,
            r#"JSON {"named_metrics": {"in_flight": 1}"#,
            r#"JSON {"named_metrics": {"in_flight": 1}} trailing"#,
            r#"JSON {named_metrics: {}}"#,
            r#"JSON {"named_metrics" {"in_flight": 1}}"#,
            r#"JSON {"named_metrics": {"in_flight": 1,}}"#,
            r#"JSON {"named_metrics": [1]}"#,
            r#"JSON {"named_metrics": {"in_flight": 1}, }"#,
            r#"JSON {"a": "unterminated}"#,
            r#"JSON {"a": "\q"}"#,
            r#"JSON {"a": "\u12"}"#,
            r#"JSON []"#,
        ] {
            let k = kind(json);
            assert!(
                matches!(k, OrcaErrorKind::Syntax | OrcaErrorKind::Number),
                "{json}: {k:?}"
            );
        }
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": true}}"#),
            OrcaErrorKind::Number
        );
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": null}}"#),
            OrcaErrorKind::Number
        );
        assert_eq!(
            kind(r#"JSON {"cpu_utilization": "high", "named_metrics": {"in_flight": 1}}"#),
            OrcaErrorKind::Number
        );
    }

    #[test]
    fn duplicates_are_refused() {
        assert_eq!(
            kind("TEXT named_metrics.in_flight=1,named_metrics.in_flight=2"),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            kind("TEXT named_metrics.in_flight=1, named_metrics.in_flight : 1"),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            kind("TEXT cpu_utilization=1,cpu_utilization=1,named_metrics.in_flight=1"),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": 1, "in_flight": 2}}"#),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": 1}, "namedMetrics": {"x": 2}}"#),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            kind(r#"JSON {"eps": 1, "eps": 2, "named_metrics": {"in_flight": 1}}"#),
            OrcaErrorKind::Duplicate
        );
        assert_eq!(
            read("TEXT named_metrics.in_flight=1,named_metrics.in_flight=2")
                .unwrap_err()
                .to_string(),
            "endpoint-load-metrics: field named_metrics.in_flight is given twice"
        );
    }

    #[test]
    fn nan_infinite_negative_and_huge_values_are_refused() {
        for value in ["NaN", "nan", "inf", "-inf", "infinity", "1e400"] {
            assert_eq!(
                kind(&format!("TEXT named_metrics.in_flight={value}")),
                OrcaErrorKind::Number,
                "{value}"
            );
        }
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": "NaN"}}"#),
            OrcaErrorKind::Number
        );
        assert_eq!(
            kind(r#"JSON {"named_metrics": {"in_flight": "Infinity"}}"#),
            OrcaErrorKind::Number
        );
        for value in ["-1", "-0.4", "-1e-300", "4294967296", "1e19", "1.7e308"] {
            assert_eq!(
                kind(&format!("TEXT named_metrics.in_flight={value}")),
                OrcaErrorKind::OutOfRange,
                "{value}"
            );
        }
        assert_eq!(
            read("TEXT named_metrics.in_flight=4294967295"),
            Ok(MAX_IN_SERVICE)
        );
        assert_eq!(
            read("TEXT named_metrics.in_flight=4294967295.4"),
            Ok(MAX_IN_SERVICE)
        );
        assert_eq!(
            kind("TEXT named_metrics.in_flight=4294967295.5"),
            OrcaErrorKind::OutOfRange
        );
        assert_eq!(read("TEXT named_metrics.in_flight=-0"), Ok(0));
        // Other fields are not counts: negative is their business.
        assert_eq!(read("TEXT eps=-1,named_metrics.in_flight=1"), Ok(1));
    }

    #[test]
    fn fractional_values_round_to_the_nearest_count() {
        assert_eq!(read("TEXT named_metrics.in_flight=12.4"), Ok(12));
        assert_eq!(read("TEXT named_metrics.in_flight=12.5"), Ok(13));
        assert_eq!(read("TEXT named_metrics.in_flight=12.0"), Ok(12));
        assert_eq!(read("TEXT named_metrics.in_flight=0.49"), Ok(0));
        assert_eq!(read("TEXT named_metrics.in_flight=1.2e1"), Ok(12));
        assert_eq!(read(r#"JSON {"named_metrics": {"in_flight": 2.6}}"#), Ok(3));
    }

    #[test]
    fn long_headers_are_bounded() {
        // 64 KiB of valid fields: refused by length, before any parsing.
        let mut header = String::from("TEXT named_metrics.in_flight=1");
        while header.len() < 64 * 1024 {
            header.push_str(&format!(",named_metrics.m{}=1", header.len()));
        }
        assert_eq!(kind(&header), OrcaErrorKind::TooLong);
        let message = read(&header).unwrap_err().to_string();
        assert!(message.contains("accepted up to 16384"), "{message}");
        // Just under the limit is read.
        let mut header = String::from("TEXT named_metrics.in_flight=9");
        while header.len() < MAX_HEADER_LEN - 64 {
            header.push_str(&format!(",named_metrics.m{}=1", header.len()));
        }
        assert_eq!(read(&header), Ok(9));
        // Deep JSON nesting is refused without recursing far.
        let deep = format!(r#"JSON {{"x": {}{}}}"#, "[".repeat(5000), "]".repeat(5000));
        assert_eq!(kind(&deep), OrcaErrorKind::Syntax);
        // A long culprit is cut in the message.
        let long = format!("TEXT named_metrics.in_flight={}", "x".repeat(8000));
        assert!(read(&long).unwrap_err().to_string().len() < 200);
        assert_eq!(
            read(&long).unwrap_err().to_string(),
            "endpoint-load-metrics: named_metrics.in_flight=\
             xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (8000 characters) is not a number"
        );
    }

    #[test]
    fn metric_names_are_checked() {
        for bad in ["", "in flight", "a,b", "a=b", "é", &"m".repeat(129)] {
            assert_eq!(
                in_service("TEXT", bad).unwrap_err().kind(),
                OrcaErrorKind::Metric,
                "{bad:?}"
            );
        }
        assert!(check_metric("vllm:num_requests_running").is_ok());
        assert!(check_metric(&"m".repeat(128)).is_ok());
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(header in ".{0,300}", metric in "[a-z_]{0,10}") {
            let _ = in_service(&header, &metric);
            let _ = in_service(&format!("TEXT {header}"), "in_flight");
            let _ = in_service(&format!("JSON {header}"), "in_flight");
        }

        #[test]
        fn json_like_strings_never_panic(header in r#"[{}\[\]":,0-9a-z.eE+\- \\u]{0,200}"#) {
            let _ = in_service(&format!("JSON {header}"), "in_flight");
        }

        #[test]
        fn reports_round_trip(
            count in 0u64..=MAX_IN_SERVICE,
            others in proptest::collection::btree_map("[a-z][a-z_]{0,8}", 0.0f64..1e6, 0..6),
            cpu in proptest::option::of(0.0f64..1.0),
            colon in any::<bool>(),
            metric in "[a-z][a-z_]{0,12}",
        ) {
            let sep = if colon { ':' } else { '=' };
            let mut fields: Vec<String> = others
                .iter()
                .filter(|(name, _)| **name != metric)
                .map(|(name, value)| format!("named_metrics.{name}{sep}{value}"))
                .collect();
            fields.insert(fields.len() / 2, format!("named_metrics.{metric}{sep}{count}"));
            if let Some(cpu) = cpu {
                fields.push(format!("cpu_utilization{sep}{cpu}"));
            }
            let text = format!("TEXT {}", fields.join(", "));
            prop_assert_eq!(in_service(&text, &metric), Ok(count));

            let mut named: Vec<String> = others
                .iter()
                .filter(|(name, _)| **name != metric)
                .map(|(name, value)| format!("\"{name}\": {value}"))
                .collect();
            named.push(format!("\"{metric}\": {count}"));
            let cpu = cpu.map(|c| format!(", \"cpuUtilization\": {c}")).unwrap_or_default();
            let json = format!("JSON {{\"named_metrics\": {{{}}}{cpu}}}", named.join(", "));
            prop_assert_eq!(in_service(&json, &metric), Ok(count));
        }
    }
}
