//! `loadring shell` over arbitrary input bytes: no panic, at most one reply
//! line per input line, and the session goes on afterwards.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadring_cli::shell::{session, Shell};

fuzz_target!(|data: &[u8]| {
    let mut shell = Shell::new("c_murmurhash_bl".parse().unwrap()).unwrap();
    let mut out = Vec::new();
    session(&mut shell, data, &mut out).unwrap();
    let replies = String::from_utf8(out).unwrap();
    assert!(replies.lines().count() <= data.split(|&b| b == b'\n').count());
    let mut tail = Vec::new();
    session(&mut shell, &b"HELP\n"[..], &mut tail).unwrap();
    assert!(String::from_utf8(tail).unwrap().starts_with("commands: "));
});
