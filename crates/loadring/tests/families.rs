//! Every policy family is whole: it parses under its name, the README's
//! policy table has its row, and a vector file of `tests/data/` runs it
//! against the system it is named after, or it is listed below with the
//! reason it has none. A family added to the core's table without these
//! fails here.

use std::collections::BTreeSet;

use loadring::{PolicySpec, POLICY_NAMES};

use crate::vectors::vector_files;

/// The families no vector file covers, and why.
const WITHOUT_VECTORS: &[(&str, &str)] = &[
    (
        "c_murmurhash_bl",
        "brpc has no bounded ring: with nothing in flight it places as c_murmurhash, whose brpc \
         vectors run; the bound is checked against a model (bounded.rs)",
    ),
    (
        "rr",
        "no placement by key: its order is checked as a sequence (policies.rs)",
    ),
    (
        "random",
        "no placement by key: checked as a distribution (policies.rs)",
    ),
    (
        "wrr",
        "no placement by key: LVS's sequence is checked in policies.rs",
    ),
    (
        "swrr",
        "no placement by key: nginx's sequence is checked in policies.rs",
    ),
    (
        "wr",
        "no placement by key: checked as a distribution (policies.rs)",
    ),
    (
        "p2c",
        "chooses by load, not by key (policies.rs, latency.rs)",
    ),
    ("la", "chooses by latency, not by key (latency.rs)"),
    (
        "zone_first",
        "wraps another policy, which places the keys (policies.rs)",
    ),
    (
        "local_first",
        "wraps another policy, which places the keys (policies.rs)",
    ),
];

/// The families the README's policy table has a row for.
fn documented() -> BTreeSet<String> {
    let readme = include_str!("../../../README.md");
    let mut lines = readme
        .lines()
        .skip_while(|l| !l.starts_with("| policy | parameters |"))
        .skip(2);
    let mut names = BTreeSet::new();
    for line in lines.by_ref().take_while(|l| l.starts_with('|')) {
        let cell = line.split('|').nth(1).unwrap().trim();
        names.insert(cell.trim_matches('`').to_string());
    }
    assert!(!names.is_empty(), "README.md: no policy table found");
    names
}

/// The families the vector files run (the outer policy of each `# policy:`).
fn with_vectors() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for path in vector_files() {
        let text = std::fs::read_to_string(&path).unwrap();
        let spec = text
            .lines()
            .find_map(|l| l.strip_prefix("# policy: "))
            .unwrap_or_else(|| panic!("{}: no `# policy:` line", path.display()));
        let spec: PolicySpec = spec.parse().unwrap();
        names.insert(spec.name().to_string());
    }
    names
}

#[test]
fn every_family_parses_is_documented_and_has_vectors_or_a_reason() {
    let documented = documented();
    let with_vectors = with_vectors();
    let mut problems = Vec::new();
    for &name in POLICY_NAMES {
        match name.to_ascii_uppercase().parse::<PolicySpec>() {
            Ok(spec) if spec.name() == name => {}
            Ok(spec) => problems.push(format!("{name}: parses as {}", spec.name())),
            Err(e) => problems.push(format!("{name}: does not parse: {e}")),
        }
        if !documented.contains(name) {
            problems.push(format!("{name}: no row in README.md's policy table"));
        }
        let reason = WITHOUT_VECTORS.iter().find(|(n, _)| *n == name);
        match (with_vectors.contains(name), reason) {
            (false, None) => problems.push(format!(
                "{name}: no vector file in tests/data and no reason in WITHOUT_VECTORS"
            )),
            (true, Some(_)) => problems.push(format!(
                "{name}: has vectors now, drop it from WITHOUT_VECTORS"
            )),
            _ => {}
        }
    }
    for name in &documented {
        if !POLICY_NAMES.contains(&name.as_str()) {
            problems.push(format!("README.md documents `{name}`, which is no family"));
        }
    }
    for (name, _) in WITHOUT_VECTORS {
        if !POLICY_NAMES.contains(name) {
            problems.push(format!(
                "WITHOUT_VECTORS lists `{name}`, which is no family"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // The table is not empty by accident: the reference systems' families.
    assert!(with_vectors.len() >= 11, "{with_vectors:?}");
}
