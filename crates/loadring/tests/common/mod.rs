//! What the property tests share.

use proptest::test_runner::Config;

/// A configuration of `default` cases, unless `PROPTEST_CASES` says how many
/// (`ProptestConfig::with_cases` ignores that variable; the default
/// configuration reads it, but only to replace its own 256).
pub fn cases(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        ..Config::default()
    }
}
