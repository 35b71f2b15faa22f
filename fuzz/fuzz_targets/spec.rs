//! The policy spec parser over arbitrary bytes: no panic, one-line errors;
//! a spec that parses builds over a small pool (or fails in one line) and
//! picks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadring::{Balancer, Endpoint, PolicySpec, Request};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let spec = match text.parse::<PolicySpec>() {
        Ok(spec) => spec,
        Err(e) => return assert!(!e.to_string().contains('\n'), "{e}"),
    };
    // Huge parameters (replicas=8388608, table_size=5000011) are valid and
    // slow to build: this target is about parsing, so keep builds small.
    if text.bytes().filter(u8::is_ascii_digit).count() > 4 {
        return;
    }
    let endpoints: Vec<Endpoint> = ["a zone=x", "b weight=2 zone=y", "c"]
        .iter()
        .map(|e| e.parse().unwrap())
        .collect();
    match Balancer::new(spec, endpoints) {
        Ok(balancer) => {
            for request in [Request::key(data), Request::code(7), Request::new().in_zone("x")] {
                if let Err(e) = balancer.pick(&request) {
                    assert!(!e.to_string().contains('\n'), "{e}");
                }
            }
        }
        Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
    }
});
