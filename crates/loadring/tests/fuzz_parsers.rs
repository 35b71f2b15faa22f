//! Fuzz-style properties of the parsers: whatever the bytes, the policy
//! spec and endpoint parsers return (never panic), and their errors are one
//! line. `fuzz/` at the top of the repository runs the same under cargo-fuzz.

use crate::common;

use loadring::{Balancer, Endpoint, PolicySpec, Request, POLICY_NAMES};
use proptest::prelude::*;

/// Text made of arbitrary bytes (invalid UTF-8 replaced, as a caller
/// holding bytes would have to).
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<u8>(), 0..80)
        .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
}

/// Text that looks like a spec: real names and keys, odd values, so the
/// parser gets past its first checks.
fn spec_like() -> impl Strategy<Value = String> {
    let name = prop::sample::select(
        POLICY_NAMES
            .iter()
            .copied()
            .chain(["MAGLEV", "nope", ""])
            .collect::<Vec<_>>(),
    );
    let key = prop::sample::select(vec![
        "replicas",
        "load_factor",
        "balance",
        "table_size",
        "compat",
        "weighted",
        "hash",
        "min_ring_size",
        "max_ring_size",
        "seed",
        "choices",
        "min_endpoints",
        "local_share",
        "x",
        "",
    ]);
    let value = prop_oneof![
        "[0-9]{0,4}",
        "-?[0-9]{1,25}(\\.[0-9]{0,12})?",
        "[a-z_+\\-.:=]{0,10}",
        prop::sample::select(vec![
            "libketama",
            "libmemcached",
            "md5",
            "murmur_hash_2",
            "1.25",
            "125",
            "7",
            "65537"
        ])
        .prop_map(str::to_string),
    ];
    let pair = (key, value).prop_map(|(k, v)| format!("{k}={v}"));
    let params = proptest::collection::vec(pair, 0..4);
    let sep = prop::sample::select(vec![":", ": ", "::", " "]);
    let over = prop::option::of(prop::sample::select(vec![
        " over rr",
        " over c_murmurhash",
        " over zone_first",
        " over",
    ]));
    (name, sep, params, over).prop_map(|(n, sep, params, over)| {
        let spec = if params.is_empty() {
            n.to_string()
        } else {
            format!("{n}{sep}{}", params.join(" "))
        };
        format!("{spec}{}", over.unwrap_or_default())
    })
}

fn endpoint_like() -> impl Strategy<Value = String> {
    let attr = prop_oneof![
        "weight=-?[0-9]{0,12}",
        "(tag|zone|hash_key)=[a-z0-9:\\[\\]]{0,6}",
        "[a-z]{0,6}=?[a-z0-9]{0,4}",
    ];
    (
        "[a-z0-9.:\\[\\]]{0,12}",
        proptest::collection::vec(attr, 0..4),
    )
        .prop_map(|(addr, attrs)| format!("{addr} {}", attrs.join(" ")))
}

fn one_line(e: &impl std::fmt::Display) -> Result<(), TestCaseError> {
    let text = e.to_string();
    prop_assert!(!text.is_empty() && !text.contains('\n'), "{:?}", text);
    Ok(())
}

/// What the properties found: errors that echoed a line break.
#[test]
fn echoed_line_breaks_are_escaped() {
    let spec = ":\n\0".parse::<PolicySpec>().unwrap_err().to_string();
    assert_eq!(spec, "`:\\n\\0`: the policy name is missing before `:`");
    let spec = "zone_first over \n over rr"
        .parse::<PolicySpec>()
        .unwrap_err();
    assert!(!spec.to_string().contains('\n'), "{spec}");
    let endpoint = "=a\nb".parse::<Endpoint>().unwrap_err().to_string();
    assert_eq!(
        endpoint,
        "endpoint `=a\\nb` must start with its address, not `=a`"
    );
    let endpoint = Endpoint::new("a\nb").unwrap_err().to_string();
    assert_eq!(
        endpoint,
        "endpoint `a\\nb`: address `a\\nb` contains white space"
    );
}

proptest! {
    // Cheap cases: thousands of them by default.
    #![proptest_config(common::cases(4096))]

    #[test]
    fn the_spec_parser_takes_any_text(input in prop_oneof![text(), spec_like()]) {
        if let Err(e) = input.parse::<PolicySpec>() {
            one_line(&e)?;
        }
    }

    /// A spec that parses, whatever white space separates its words, has a
    /// canonical text of one line: no control character, no white space but
    /// single spaces, and it parses back to the same spec.
    #[test]
    fn a_parsed_spec_prints_one_clean_line(spec in spec_like(),
                                           gaps in proptest::collection::vec(
                                               prop::sample::select(vec![
                                                   " ", "  ", "\t", "\n", "\r\n", "\u{b}", "\u{c}",
                                                   "\u{85}", "\u{a0}", "\u{2003}", "\u{2028}", " \t\n ",
                                               ]),
                                               16)) {
        let mut gaps = gaps.into_iter().cycle();
        let input: String = spec
            .split(' ')
            .enumerate()
            .map(|(i, word)| if i == 0 { word.to_string() } else { format!("{}{word}", gaps.next().unwrap()) })
            .collect();
        if let Ok(parsed) = input.parse::<PolicySpec>() {
            let text = parsed.as_str();
            prop_assert!(
                !text.contains("  ")
                    && !text.starts_with(' ')
                    && !text.ends_with(' ')
                    && text.chars().all(|c| c == ' ' || !(c.is_whitespace() || c.is_control())),
                "{:?} -> {:?}", input, text
            );
            prop_assert_eq!(parsed.to_string(), text);
            prop_assert_eq!(&text.parse::<PolicySpec>().unwrap(), &parsed);
            prop_assert_eq!(&spec.parse::<PolicySpec>().unwrap(), &parsed);
        }
    }

    #[test]
    fn the_endpoint_parser_takes_any_text(input in prop_oneof![text(), endpoint_like()]) {
        match input.parse::<Endpoint>() {
            Err(e) => one_line(&e)?,
            // What parses prints back to text that parses to the same.
            Ok(e) => prop_assert_eq!(e.to_string().parse::<Endpoint>().unwrap(), e),
        }
    }

}

proptest! {
    #![proptest_config(common::cases(512))]

    /// Specs that parse build over a small pool (or fail in one line) and
    /// pick, with keys of any bytes and codes of any value.
    #[test]
    fn parsed_specs_build_and_pick(spec in spec_like(),
                                   weights in proptest::collection::vec(0u32..3, 1..5),
                                   key in proptest::collection::vec(any::<u8>(), 0..20),
                                   code in any::<u64>()) {
        let Ok(spec) = spec.parse::<PolicySpec>() else { return Ok(()) };
        // Parameters of up to 4 digits keep the rings small (replicas <= 9999).
        let endpoints: Vec<Endpoint> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Endpoint::new(format!("10.0.0.{i}:80")).unwrap().with_weight(w).with_zone(format!("z{}", i % 2)).unwrap())
            .collect();
        match Balancer::new(spec, endpoints) {
            Err(e) => one_line(&e)?,
            Ok(balancer) => {
                for request in [Request::key(&key), Request::code(code), Request::new(), Request::key(&key).in_zone("z1")] {
                    if let Err(e) = balancer.pick(&request) {
                        one_line(&e)?;
                    }
                }
            }
        }
    }
}
