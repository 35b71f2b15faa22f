//! The endpoint parser over arbitrary bytes: no panic, one-line errors, and
//! what parses prints back to the same endpoint.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadring::Endpoint;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match text.parse::<Endpoint>() {
        Ok(endpoint) => assert_eq!(endpoint.to_string().parse::<Endpoint>().unwrap(), endpoint),
        Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
    }
});
