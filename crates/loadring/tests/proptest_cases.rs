//! `PROPTEST_CASES` decides how many cases every property test runs, so a
//! long run (`PROPTEST_CASES=100000 cargo test`) is one variable away.
//!
//! The only test in this binary: it sets the variable for its own process.

use crate::common;

use std::cell::Cell;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// How many cases a runner of `config` runs.
fn runs(config: Config) -> u32 {
    let runs = Cell::new(0);
    TestRunner::new(config)
        .run(&any::<u8>(), |_| {
            runs.set(runs.get() + 1);
            Ok(())
        })
        .unwrap();
    runs.get()
}

#[test]
fn proptest_cases_overrides_the_configured_count() {
    std::env::set_var("PROPTEST_CASES", "3");
    // A configuration written for 200 cases, as the property tests write theirs.
    assert_eq!(runs(common::cases(200)), 3);
    std::env::remove_var("PROPTEST_CASES");
    assert_eq!(
        runs(common::cases(5)),
        5,
        "without it, the configured count"
    );
}
