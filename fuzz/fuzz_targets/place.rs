//! `loadring place` over arbitrary input bytes: the first byte chooses the
//! policy and `--codes`, the rest is stdin. No panic; one output line per
//! input line, or one error line naming the line that stopped it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadring::Balancer;
use loadring_cli::place::place_lines;

const POLICIES: [&str; 5] = ["c_murmurhash", "ketama", "maglev:table_size=7", "rr", "swrr"];

fuzz_target!(|data: &[u8]| {
    let Some((&choice, input)) = data.split_first() else {
        return;
    };
    let policy = POLICIES[usize::from(choice) % POLICIES.len()];
    let codes = choice & 0x80 != 0;
    let endpoints = ["a", "b weight=2", "c"].map(|e| e.parse().unwrap());
    let balancer = Balancer::new(policy.parse().unwrap(), endpoints).unwrap();
    let mut out = Vec::new();
    let result = place_lines(&balancer, input, &mut out, codes, None);
    let lines = input.split(|&b| b == b'\n').count()
        - usize::from(input.is_empty() || input.ends_with(b"\n"));
    let placed = out.iter().filter(|&&b| b == b'\n').count();
    match result {
        Ok(()) => assert_eq!(placed, lines),
        Err(msg) => {
            assert!(!msg.contains('\n'), "{msg}");
            assert!(msg.starts_with(&format!("line {}: ", placed + 1)), "{msg}");
        }
    }
});
