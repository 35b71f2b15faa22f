//! The endpoints file: one endpoint per line, blank lines and `#` comments
//! ignored (the format `loadring place --endpoints` reads).

use loadring::Endpoint;

/// Parses an endpoints file's text.
///
/// # Errors
/// The first bad line, as `line N: why`.
pub fn parse_endpoints(text: &str) -> Result<Vec<Endpoint>, String> {
    let mut endpoints = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let endpoint = line
            .parse::<Endpoint>()
            .map_err(|e| format!("line {}: {e}", n + 1))?;
        endpoints.push(endpoint);
    }
    Ok(endpoints)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let eps = parse_endpoints("# fleet\n\n127.0.0.1:1 weight=2\n  127.0.0.1:2  \n").unwrap();
        let addrs: Vec<_> = eps.iter().map(|e| (e.addr(), e.weight())).collect();
        assert_eq!(addrs, [("127.0.0.1:1", 2), ("127.0.0.1:2", 1)]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let err = parse_endpoints("127.0.0.1:1\n127.0.0.1:2 weight=x\n").unwrap_err();
        assert!(err.starts_with("line 2: "), "{err}");
    }
}
