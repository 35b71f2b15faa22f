//! Fuzz-style properties of the line handling of `place` and `shell`:
//! whatever the bytes, no panic, one output line per input line (or one
//! error line), and the session of `shell` goes on. `fuzz/` at the top of
//! the repository runs the same under cargo-fuzz.

use loadring::Balancer;
use loadring_cli::place::place_lines;
use loadring_cli::shell::{session, Shell};
use proptest::prelude::*;

/// Input bytes: mostly short lines of arbitrary bytes (newlines, `\r`,
/// digits, invalid UTF-8 included), now and then one line over 64 KiB.
fn input() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        3 => any::<u8>(),
        2 => Just(b'\n'),
        1 => Just(b'\r'),
        2 => b'0'..=b'9',
    ];
    let long = prop::option::weighted(0.05, 65_530usize..65_545);
    (proptest::collection::vec(byte, 0..300), long).prop_map(|(mut bytes, long)| {
        if let Some(n) = long {
            bytes.extend(std::iter::repeat_n(b'k', n));
            bytes.push(b'\n');
            bytes.extend(b"after\n");
        }
        bytes
    })
}

/// Shell lines: commands with odd arguments, and arbitrary bytes.
fn shell_input() -> impl Strategy<Value = Vec<u8>> {
    let command = prop::sample::select(vec![
        "ADD", "add", "REMOVE", "LOOKUP", "ASSIGN", "RELEASE", "CAP", "LOADS", "HELP", "#", "",
    ]);
    let argument = prop_oneof![
        "[a-c]{1,2}( weight=[0-9]{0,3})?",
        "[a-c ]{0,4}",
        proptest::collection::vec(any::<u8>(), 0..12)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ];
    let line = (command, argument).prop_map(|(c, a)| format!("{c} {a}").into_bytes());
    let lines = proptest::collection::vec(
        prop_oneof![4 => line, 1 => proptest::collection::vec(any::<u8>(), 0..20)],
        0..40,
    );
    (lines, input()).prop_map(|(lines, noise)| {
        let mut bytes: Vec<u8> = lines.join(&b'\n');
        bytes.push(b'\n');
        bytes.extend(noise);
        bytes
    })
}

proptest! {
    #[test]
    fn place_handles_any_bytes(
        bytes in input(),
        policy in prop::sample::select(vec!["c_murmurhash", "ketama", "maglev:table_size=7", "rr", "swrr"]),
        codes in any::<bool>(),
    ) {
        let endpoints = ["a", "b weight=2", "c"].map(|e| e.parse().unwrap());
        let balancer = Balancer::new(policy.parse().unwrap(), endpoints).unwrap();
        let mut out = Vec::new();
        let result = place_lines(&balancer, &bytes[..], &mut out, codes, None);
        let lines = bytes.split(|&b| b == b'\n').count() - usize::from(bytes.ends_with(b"\n") || bytes.is_empty());
        let placed = out.iter().filter(|&&b| b == b'\n').count();
        match result {
            Ok(()) => prop_assert_eq!(placed, lines),
            Err(msg) => {
                prop_assert!(placed < lines);
                // One line, naming the line that stopped it.
                prop_assert!(!msg.contains('\n'), "{}", msg);
                let expected = format!("line {}: ", placed + 1);
                prop_assert!(msg.starts_with(&expected), "{}", msg);
            }
        }
        // Each output line is its input (less a final `\r`), a tab, an address.
        for (got, want) in out
            .split(|&b| b == b'\n')
            .zip(bytes.split(|&b| b == b'\n'))
            .take(placed)
        {
            let want = want.strip_suffix(b"\r").unwrap_or(want);
            prop_assert!(got.starts_with(want) && got[want.len()] == b'\t');
        }
    }

    #[test]
    fn shell_answers_any_bytes_and_goes_on(bytes in shell_input()) {
        let mut shell = Shell::new("c_murmurhash_bl".parse().unwrap()).unwrap();
        let mut out = Vec::new();
        prop_assert!(session(&mut shell, &bytes[..], &mut out).is_ok());
        let replies = String::from_utf8(out).expect("replies are UTF-8");
        let lines = bytes.split(|&b| b == b'\n').count();
        prop_assert!(replies.lines().count() <= lines);
        // The session is still alive after whatever came before.
        let mut tail = Vec::new();
        session(&mut shell, &b"HELP\n"[..], &mut tail).unwrap();
        prop_assert!(String::from_utf8(tail).unwrap().starts_with("commands: "));
    }
}
