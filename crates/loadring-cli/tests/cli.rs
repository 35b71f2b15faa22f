//! The `loadring` binary as its users drive it.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn loadring(args: &[&str], stdin: &str) -> Output {
    loadring_bytes(args, stdin.as_bytes())
}

fn loadring_bytes(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loadring"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run loadring");
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        // A command that fails early closes its stdin: that is not an error here.
        let _ = input.write_all(&bytes);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn vector_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../loadring/tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 25,
        "the reference vectors are in {}",
        dir.display()
    );
    files
}

/// Every reference vector file, through `loadring place`, as check_vectors.py does.
#[test]
fn place_reproduces_every_reference_vector() {
    for file in vector_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut args = vec!["place".to_string()];
        let mut rows = Vec::new();
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("# policy: ") {
                args.extend(["--policy".into(), p.into()]);
            } else if let Some(e) = line.strip_prefix("# endpoint: ") {
                args.extend(["-e".into(), e.into()]);
            } else if line == "# input: codes" {
                args.push("--codes".into());
            } else if !line.starts_with('#') && !line.is_empty() {
                rows.push(line);
            }
        }
        let input: String = rows
            .iter()
            .map(|r| format!("{}\n", r.split('\t').next().unwrap()))
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = loadring(&args, &input);
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = String::from_utf8(out.stdout).unwrap();
        let got: Vec<&str> = got.lines().collect();
        assert_eq!(got.len(), rows.len(), "{name}");
        let wrong = got.iter().zip(&rows).filter(|(g, w)| g != w).count();
        assert_eq!(wrong, 0, "{name}: {wrong} of {} rows differ", rows.len());
    }
}

/// Bad input: exit code 2 and exactly one line `error: ...` naming the culprit.
#[test]
fn bad_input_is_one_error_line_and_exit_code_2() {
    let cases: &[(&[&str], &str, &str)] = &[
        (
            &["place", "--policy", "nope", "-e", "a"],
            "",
            "unknown policy `nope`",
        ),
        (
            &["place", "--policy", "rr", "--endpoints", "/dev/zero"],
            "",
            "--endpoints /dev/zero: more than 16 MiB",
        ),
        (
            &["simulate", "--policy", "rr", "--endpoints", "/dev/zero"],
            "",
            "--endpoints /dev/zero: more than 16 MiB",
        ),
        (
            &["place", "--policy", "c_md5:replicas=0", "-e", "a"],
            "",
            "replicas=0 is out of range: accepted 1..=8388608",
        ),
        (
            &["place", "--policy", "c_ketama:replicas=6", "-e", "a"],
            "",
            "multiple of 4",
        ),
        (
            &[
                "place",
                "--policy",
                "c_murmurhash_bl:load_factor=1.0",
                "-e",
                "a",
            ],
            "",
            "load_factor=1.0",
        ),
        (
            &[
                "place",
                "--policy",
                "c_murmurhash_bl:balance=99.5",
                "-e",
                "a",
            ],
            "",
            "balance=99.5",
        ),
        (
            &["place", "--policy", "haproxy_hash:function=md5", "-e", "a"],
            "",
            "haproxy_hash: function=md5: accepted sdbm, djb2, wt6, crc32, none",
        ),
        (
            &["place", "--policy", "haproxy_hash", "-e", "a hash_key=web"],
            "",
            "haproxy_hash: endpoint `a`: hash_key=web is not a server id",
        ),
        (
            &["place", "--policy", "twemproxy:hash_tag=x", "-e", "a"],
            "",
            "twemproxy: hash_tag=x: accepted two ASCII characters",
        ),
        (
            &["place", "--policy", "nginx_hash:consistent=1", "-e", "a"],
            "",
            "nginx_hash: consistent=1: accepted true or false",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a weight=-1"],
            "",
            "weight `-1`",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a color=red"],
            "",
            "unknown attribute `color`",
        ),
        (&["place", "--policy", "c_md5"], "", "no endpoints"),
        (
            &["place", "--policy", "c_md5", "-e", "a weight=0"],
            "",
            "every endpoint has weight 0",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a", "--codes"],
            "1\n2\nx\n",
            "line 3: `x` is not a request code",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a", "--codes"],
            "4294967296\n",
            "line 1: request code 4294967296 is out of range",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a", "--codes"],
            "+5\n",
            "line 1: `+5` is not a request code: accepted decimal digits only",
        ),
        (
            &["place", "--policy", "c_md5", "-e", "a", "--codes"],
            "7\n 5\n",
            "line 2: ` 5` is not a request code",
        ),
        (
            &["place", "--policy", "rr", "-e", "a", "--codes"],
            "1\nabc\n",
            "line 2: `abc` is not a request code: accepted decimal digits only, 0..=18446744073709551615",
        ),
        (
            &["place", "--policy", "rr", "-e", "a", "--codes"],
            "18446744073709551616\n",
            "line 1: `18446744073709551616` is not a request code",
        ),
        (
            &[
                "place",
                "--policy",
                "c_md5",
                "-e",
                "a",
                "--endpoints",
                "/nonexistent",
            ],
            "",
            "--endpoints /nonexistent",
        ),
        (
            &[
                "place",
                "--policy",
                "maglev:table_size=2",
                "-e",
                "a",
                "-e",
                "b",
                "-e",
                "c",
            ],
            "",
            "error: --policy: maglev: table_size=2 is smaller than the 3 endpoints of weight >= 1, \
             which need a slot each: accepted a prime from 3 to 5000011",
        ),
        (
            &[
                "describe",
                "--policy",
                "maglev:table_size=2",
                "-e",
                "a",
                "-e",
                "b",
                "-e",
                "c",
            ],
            "",
            "error: --policy: maglev: table_size=2 is smaller than the 3 endpoints",
        ),
        (
            &["place", "--policy", "dubbo:nodes=0", "-e", "a:1"],
            "",
            "error: --policy: dubbo: nodes=0 is out of range: accepted 4..=8388608",
        ),
        (
            &["place", "--policy", "pixiu_ring:max_vnode_num=0", "-e", "a:1"],
            "",
            "pixiu_ring: max_vnode_num=0 is out of range: accepted 1..=4294967295",
        ),
        (
            &["describe", "--policy", "pixiu_ring:replica_num=5000000", "-e", "a:1", "-e", "b:1"],
            "",
            "pixiu_ring: replica_num=5000000 over 2 endpoints makes 10000000 points, more than the limit of 8388608",
        ),
        (
            &["describe", "--policy", "c_md5:replicas=x", "-e", "a"],
            "",
            "replicas=x is not a whole number",
        ),
        (
            &["shell", "--policy", "c_murmurhash_bl:load_factor=abc"],
            "",
            "load_factor=abc",
        ),
    ];
    for (args, stdin, want) in cases {
        let out = loadring(args, stdin);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            err.starts_with("error: ") && err.contains(want),
            "{args:?}: {err:?} lacks {want:?}"
        );
    }
}

/// A command line clap refuses is one `error:` line naming the culprit,
/// exit code 2, as every other mistake.
#[test]
fn command_line_mistakes_are_one_line() {
    for (args, culprit) in [
        (
            &["place", "-e", "a"][..],
            "not provided: --policy <SPEC> (loadring place --help",
        ),
        (&["place", "--bogus"][..], "unexpected argument '--bogus'"),
        (
            &["simulate", "--json", "--json"][..],
            "'--json' cannot be used multiple times",
        ),
        (
            &["simulate", "--scenario", "slow-backend", "--rate", "10"][..],
            "cannot be used with",
        ),
        (
            &["place", "--policy"][..],
            "a value is required for '--policy <SPEC>'",
        ),
        (&["bogus"][..], "unrecognized subcommand 'bogus'"),
        (
            &["simulate", "-n", "5", "-e", "a", "-e", "b"][..],
            "'--backends <N>' cannot be used with",
        ),
    ] {
        let out = loadring(args, "");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(culprit), "{args:?}: {stderr}");
    }
    // Help is still help.
    let help = loadring(&["place", "--help"], "");
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage: loadring place"));
}

/// An endpoints file that starts with a byte order mark (some editors
/// write one) places as the same file without it.
#[test]
fn an_endpoints_file_with_a_byte_order_mark_places_as_without() {
    let dir = std::env::temp_dir().join(format!("loadring-bom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain = dir.join("plain.txt");
    let marked = dir.join("marked.txt");
    std::fs::write(&plain, "10.0.0.1:80\n10.0.0.2:80\n10.0.0.3:80\n").unwrap();
    std::fs::write(&marked, "\u{feff}10.0.0.1:80\n10.0.0.2:80\n10.0.0.3:80\n").unwrap();
    let keys = "a\nb\nc\nd\ne\nf\n";
    let place = |file: &std::path::Path| {
        let file = file.to_str().unwrap();
        loadring(
            &["place", "--policy", "c_murmurhash", "--endpoints", file],
            keys,
        )
    };
    let (plain, marked) = (place(&plain), place(&marked));
    assert!(
        marked.status.success(),
        "{}",
        String::from_utf8_lossy(&marked.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&marked.stdout),
        String::from_utf8_lossy(&plain.stdout)
    );
    assert!(String::from_utf8_lossy(&plain.stdout).contains("10.0.0.1:80"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn place_keeps_the_lines_before_a_bad_one() {
    let out = loadring(
        &[
            "place",
            "--policy",
            "c_murmurhash",
            "-e",
            "10.0.0.1:80",
            "--codes",
        ],
        "5\nbad\n",
    );
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "5\t10.0.0.1:80\n");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn describe_json_shares_sum_to_one() {
    let out = loadring(
        &[
            "describe",
            "--policy",
            "c_md5",
            "-e",
            "10.0.0.1:80",
            "-e",
            "10.0.0.2:80 weight=3",
            "--json",
        ],
        "",
    );
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["entries"], 400);
    assert_eq!(json["entry_label"], "points");
    let shares: Vec<f64> = json["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["share"].as_f64().unwrap())
        .collect();
    assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    assert!(
        shares[1] > 2.0 * shares[0],
        "weight 3 owns about three quarters: {shares:?}"
    );
    assert!(json["deviation"].as_f64().unwrap() > 0.0);
}

/// describe for the proxies' policies: each layout's size and label, the
/// weight-3 endpoint owning about three quarters.
#[test]
fn describe_the_proxy_policies() {
    for (spec, entries, label) in [
        // 160 points per unit of weight (a duplicate point would be dropped).
        ("nginx_hash:consistent=true", 640, "points"),
        ("nginx_hash", 4, "slots"),
        // 16 nodes per unit of weight.
        ("haproxy_hash:type=consistent", 64, "nodes"),
        ("haproxy_hash", 4, "slots"),
        // f32(1/4 * 160 / 4 * 2) = 20 digests, 80 points; 60 digests, 240 points.
        ("twemproxy", 320, "points"),
        ("twemproxy:distribution=modula", 4, "slots"),
    ] {
        let out = loadring(
            &[
                "describe",
                "--policy",
                spec,
                "-e",
                "10.0.0.1:80",
                "-e",
                "10.0.0.2:80 weight=3",
                "--json",
            ],
            "",
        );
        assert!(out.status.success(), "{spec}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["entries"], entries, "{spec}");
        assert_eq!(json["entry_label"], label, "{spec}");
        let second = json["endpoints"][1]["share"].as_f64().unwrap();
        assert!((0.6..0.9).contains(&second), "{spec}: {second}");
    }
}

/// describe over Dubbo's and pixiu's rings: 40 digests of 4 points per
/// endpoint for Dubbo, 10 points for pixiu, none for a drained endpoint;
/// where every point collides the later write owns the whole ring.
#[test]
fn describe_dubbo_and_pixiu_ring() {
    let shares = |spec: &str, endpoints: &[&str]| -> (u64, Vec<f64>) {
        let mut args = vec!["describe", "--policy", spec, "--json"];
        for e in endpoints {
            args.extend(["-e", e]);
        }
        let out = loadring(&args, "");
        assert!(
            out.status.success(),
            "{spec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let shares: Vec<f64> = json["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["share"].as_f64().unwrap())
            .collect();
        assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{spec}");
        (json["entries"].as_u64().unwrap(), shares)
    };
    let three = [
        "10.0.0.1:20880",
        "10.0.0.2:20880",
        "10.0.0.3:20880 weight=0",
    ];
    for (spec, entries) in [("dubbo", 320), ("pixiu_ring", 20)] {
        let (n, s) = shares(spec, &three);
        assert_eq!(n, entries, "{spec}");
        assert!(s[0] > 0.2 && s[1] > 0.2, "{spec}: {s:?}");
        assert_eq!(s[2], 0.0, "{spec}: drained");
    }
    // One position: both endpoints write it, the later one keeps it.
    let (n, s) = shares("pixiu_ring:max_vnode_num=1", &three[..2]);
    assert_eq!((n, s), (1, vec![0.0, 1.0]));
    // One address twice: Dubbo's later endpoint overwrites every point,
    // pixiu ignores the later one.
    let twice = ["10.0.0.1:20880 tag=a", "10.0.0.1:20880 tag=b"];
    assert_eq!(shares("dubbo", &twice), (160, vec![0.0, 1.0]));
    assert_eq!(shares("pixiu_ring", &twice), (10, vec![1.0, 0.0]));
}

#[test]
fn describe_prints_an_aligned_table() {
    let out = loadring(
        &[
            "describe",
            "--policy",
            "c_murmurhash",
            "-e",
            "10.0.0.1:80",
            "-e",
            "web-long-name",
        ],
        "",
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("points     200"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("10.0.0.1:80") || l.starts_with("web-long-name"))
        .collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0].find('%'),
        rows[1].find('%'),
        "columns line up:\n{text}"
    );
}

#[test]
fn shell_reproduces_the_course_walk_through() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let input = std::fs::read_to_string(dir.join("shell_walkthrough.in")).unwrap();
    let want = std::fs::read_to_string(dir.join("shell_walkthrough.out")).unwrap();
    let out = loadring(&["shell"], &input);
    assert!(out.status.success());
    let got = String::from_utf8(out.stdout).unwrap();
    assert_eq!(got.lines().count(), want.lines().count());
    for (g, w) in got.lines().zip(want.lines()) {
        assert!(
            g == w || (w == "ERR" && g.starts_with("ERR ")),
            "got {g:?}, want {w:?}"
        );
    }
}

/// HAProxy's own bounded rule (`hash-balance-factor`), two sessions observed
/// on a live HAProxy with held requests; each names its policy on its first
/// line, read by the shell itself and also given with `--policy`.
#[test]
fn shell_reproduces_haproxy_bounded_sessions() {
    replays_shell_sessions(&["haproxy_bounded_eq3_F125", "haproxy_bounded_w5_rel_F125"]);
}

/// Envoy's own bounded rule (`hash_balance_factor`): its slots, its spills
/// in the MT19937 visiting order and its least-overloaded fallback, two
/// shared sessions (`ring_hash` with equal weights, `maglev` weighted).
#[test]
fn shell_reproduces_envoy_bounded_sessions() {
    replays_shell_sessions(&["envoy_bounded_ring_F150", "envoy_bounded_maglev_w_F125"]);
}

/// Replays each recorded session `tests/data/NAME.in` through `shell`, which
/// reads the policy from its first line (`# policy: SPEC`), and again with
/// that policy given as `--policy`: both print `NAME.out` byte for byte.
fn replays_shell_sessions(names: &[&str]) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    for name in names {
        let input = std::fs::read_to_string(dir.join(format!("{name}.in"))).unwrap();
        let want = std::fs::read_to_string(dir.join(format!("{name}.out"))).unwrap();
        let policy = input
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# policy: "))
            .unwrap();
        for args in [vec!["shell"], vec!["shell", "--policy", policy]] {
            let out = loadring(&args, &input);
            assert!(out.status.success(), "{name}");
            let got = String::from_utf8(out.stdout).unwrap();
            assert_eq!(got, want, "{name} {args:?}");
        }
    }
}

/// Envoy's rule is a policy like any other: `describe` takes it, `shell`
/// reports its caps (`slots + 1`), and bad values are one line naming the key
/// and the range.
#[test]
fn envoys_rule_through_describe_shell_and_errors() {
    let out = loadring(
        &[
            "describe",
            "--policy",
            "ring_hash:hash_balance_factor=150",
            "-e",
            "10.0.0.1:80",
            "-e",
            "10.0.0.2:80",
        ],
        "",
    );
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("policy     ring_hash:hash_balance_factor=150\n"),
        "{text}"
    );
    // Two equal nodes, F = 150: T = 0 gives total 2, 1 slot each (cap 2);
    // after one ASSIGN, T = 1: total 3, ceil(1.5) = 2 slots (cap 3).
    let session = "ADD a\nADD b\nCAP\nASSIGN k\nCAP\n";
    let out = loadring(
        &["shell", "--policy", "maglev:hash_balance_factor=150"],
        session,
    );
    let got = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = got.lines().collect();
    assert_eq!(lines[2], "2", "{got}");
    assert_eq!(lines[4], "3", "{got}");
    for (spec, want) in [
        (
            "ring_hash:hash_balance_factor=99",
            "ring_hash: hash_balance_factor=99: expected an integer percent from 100 to 100000",
        ),
        (
            "maglev:hash_balance_factor=125 load_factor=1.25",
            "maglev: give hash_balance_factor (Envoy's rule) or load_factor (loadring's cap), not both",
        ),
    ] {
        let out = loadring(&["shell", "--policy", spec], "");
        assert!(!out.status.success(), "{spec}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }
}

/// A `# policy:` line chooses the policy only before the first node and
/// only without `--policy`; a bad one is an error line.
#[test]
fn shell_policy_line_rules() {
    let session = "# policy: haproxy_hash:type=consistent\nADD s1\nADD s2\nADD s3\nLOOKUP hot\n";
    let run = |args: &[&str], input: &str| String::from_utf8(loadring(args, input).stdout).unwrap();
    // "hot" is s1's under HAProxy, s2's under the default c_murmurhash_bl.
    assert_eq!(run(&["shell"], session), "OK\nOK\nOK\ns1\n");
    assert_eq!(
        run(&["shell", "--policy", "c_murmurhash_bl"], session),
        "OK\nOK\nOK\ns2\n"
    );
    let late = "ADD s1\n# policy: haproxy_hash:type=consistent\nADD s2\nADD s3\nLOOKUP hot\n";
    assert_eq!(run(&["shell"], late), "OK\nOK\nOK\ns2\n");
    let bad = run(&["shell"], "# policy: haproxy_hash:function=md5\nADD s1\n");
    assert!(
        bad.starts_with(
            "ERR # policy: haproxy_hash: function=md5: accepted sdbm, djb2, wt6, crc32, none\nOK"
        ),
        "{bad}"
    );
}

/// Non-hashing policies: each line is one pick, released before the next.
#[test]
fn place_runs_the_classic_policies_line_by_line() {
    let lines = "x\n".repeat(12);
    let picks = |args: &[&str]| -> Vec<String> {
        let out = loadring(args, &lines);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap().to_string())
            .collect()
    };
    // LVS wrr, weights 3,2,7: indices 2,2,2,2,0,2,0,1,2,0,1,2 (seed 004).
    let wrr = picks(&[
        "place",
        "-p",
        "wrr",
        "-e",
        "a weight=3",
        "-e",
        "b weight=2",
        "-e",
        "c weight=7",
    ]);
    assert_eq!(wrr.join(""), "ccccacabcabc");
    // nginx swrr, weights 5,1,1: a,a,b,a,c,a,a.
    let swrr = picks(&[
        "place",
        "-p",
        "swrr",
        "-e",
        "a weight=5",
        "-e",
        "b",
        "-e",
        "c",
    ]);
    assert_eq!(swrr[..7].join(""), "aabacaa");
    let rr = picks(&["place", "-p", "rr", "-e", "a", "-e", "b", "-e", "c"]);
    assert_eq!(rr[..4].join(""), "abca", "starts at the first endpoint");
}

#[test]
fn place_takes_the_request_zone() {
    let args = [
        "place",
        "-p",
        "zone_first over c_murmurhash",
        "-e",
        "a zone=eu",
        "-e",
        "b zone=us",
        "-e",
        "c zone=eu",
    ];
    let in_us = loadring(&[&args[..], &["--zone", "us"]].concat(), "k1\nk2\nk3\n");
    assert_eq!(
        String::from_utf8(in_us.stdout).unwrap(),
        "k1\tb\nk2\tb\nk3\tb\n"
    );
    let in_eu = loadring(&[&args[..], &["--zone", "eu"]].concat(), "k1\nk2\nk3\nk4\n");
    assert!(String::from_utf8(in_eu.stdout)
        .unwrap()
        .lines()
        .all(|l| !l.ends_with("\tb")));
}

/// brpc's `share * N` counts the endpoints that take keys: a drained one
/// (weight 0) is not one of the N.
#[test]
fn describe_share_times_n_leaves_out_weight_zero() {
    let args = ["describe", "-p", "c_murmurhash", "--json"];
    let endpoints = ["-e", "a", "-e", "b", "-e", "c weight=0"];
    let out = loadring(&[&args[..], &endpoints].concat(), "");
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let endpoints = json["endpoints"].as_array().unwrap();
    for e in endpoints {
        let (share, times_n) = (
            e["share"].as_f64().unwrap(),
            e["share_times_n"].as_f64().unwrap(),
        );
        // Each is printed to 12 decimals: off by 0.5e-12 at most.
        assert!((times_n - 2.0 * share).abs() <= 1.5e-12 + 1e-15, "{e}");
    }
    let sum: f64 = endpoints
        .iter()
        .map(|e| e["share_times_n"].as_f64().unwrap())
        .sum();
    assert!((sum - 2.0).abs() < 1e-9, "{sum}");
}

/// A request's zone only means something to a locality policy, and no
/// endpoint is in the empty zone: both are refused rather than ignored.
#[test]
fn place_refuses_a_zone_that_would_do_nothing() {
    for (policy, zone, message) in [
        (
            "c_murmurhash",
            "us",
            "error: --zone: only with a locality policy (zone_first or local_first over another), not c_murmurhash\n",
        ),
        (
            "zone_first over c_murmurhash",
            "",
            "error: --zone: empty; give the zone requests come from\n",
        ),
    ] {
        let out = loadring(
            &["place", "-p", policy, "-e", "a zone=us", "--zone", zone],
            "k1\n",
        );
        assert_eq!(out.status.code(), Some(2), "{policy} {zone:?}");
        assert!(out.stdout.is_empty(), "{policy} {zone:?}");
        assert_eq!(String::from_utf8(out.stderr).unwrap(), message);
    }
}

/// `describe` names the policy that has no hash space, also inside a
/// locality chain.
#[test]
fn describe_names_the_policy_without_a_hash_space() {
    let out = loadring(
        &["describe", "-p", "zone_first over rr", "-e", "a zone=us"],
        "",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "error: describe: rr does not place requests by hash, so it has no hash space to describe\n"
    );
}

/// Keys are bytes: anything but `\n`, echoed back as they came.
#[test]
fn place_takes_any_bytes_as_a_key_and_echoes_them() {
    let input = b"caf\xe9\n\xff\x00\xfe\nplain\r\nin\rside\n";
    let out = loadring_bytes(&["place", "-p", "c_murmurhash", "-e", "web"], input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A CRLF line ending is not part of the key; a `\r` inside a key is.
    let want: &[u8] = b"caf\xe9\tweb\n\xff\x00\xfe\tweb\nplain\tweb\nin\rside\tweb\n";
    assert_eq!(out.stdout, want);
}

/// Non-UTF-8 keys hash as their bytes: two keys differing only in a byte
/// that is not UTF-8 may land apart, as the same keys given as codes do.
#[test]
fn place_hashes_the_key_bytes() {
    let endpoints = ["-e", "a", "-e", "b", "-e", "c", "-e", "d"];
    let args = [&["place", "-p", "c_murmurhash"][..], &endpoints].concat();
    let keys: Vec<u8> = (0u8..=255)
        .filter(|&b| b != b'\n' && b != b'\r')
        .flat_map(|b| [b'k', b, b'\n'])
        .collect();
    let out = loadring_bytes(&args, &keys);
    assert!(out.status.success());
    let owners: std::collections::HashSet<&[u8]> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter_map(|l| l.rsplit(|&b| b == b'\t').next())
        .filter(|owner| !owner.is_empty())
        .collect();
    assert_eq!(owners.len(), 4, "254 distinct keys reach every endpoint");
}

/// A line may hold 65536 bytes; a longer one stops `place` at once, without
/// holding the line (the input never ends here: a reader of whole lines
/// would wait forever).
#[test]
fn place_rejects_a_line_longer_than_64_kib() {
    let mut input = b"first\n".to_vec();
    input.extend(std::iter::repeat_n(b'k', 65536));
    input.push(b'\n');
    let ok = loadring_bytes(&["place", "-p", "c_md5", "-e", "a"], &input);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(ok.stdout.len(), "first\ta\n".len() + 65536 + "\ta\n".len());

    let mut child = Command::new(env!("CARGO_BIN_EXE_loadring"))
        .args(["place", "-p", "c_md5", "-e", "a"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        stdin.write_all(b"first\n").unwrap();
        let chunk = vec![b'k'; 1 << 20];
        // Ends when loadring closes its stdin; 256 MiB at most, so a
        // loadring that reads everything fails the test instead of hanging it.
        for _ in 0..256 {
            if stdin.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        "error: line 2: longer than 65536 bytes (the longest input line accepted)\n"
    );
    assert_eq!(out.stdout, b"first\ta\n");
}

/// A line the shell cannot read (not UTF-8, too long) is one `ERR` reply
/// and the session goes on.
#[test]
fn shell_answers_unreadable_lines_with_err_and_goes_on() {
    let mut input = b"ADD a\n\xff\xfe\nLOOKUP \xc3\n".to_vec();
    input.extend(std::iter::repeat_n(b'x', 100_000));
    input.extend(b"\nASSIGN k\nLOADS\n");
    let out = loadring_bytes(&["shell"], &input);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got.len(), 6, "{got:?}");
    assert_eq!(got[0], "OK");
    assert_eq!(got[1], "ERR line 2: not UTF-8");
    assert_eq!(got[2], "ERR line 3: not UTF-8");
    assert_eq!(got[3], "ERR line 4: longer than 65536 bytes");
    assert_eq!(got[4..], ["a", "a=1"]);
}

/// libmemcached's weighted ketama gives a server `floor(w / W * 40 * N)`
/// groups of 4 points: `floor(1 / 2001 * 120) = 0` for weight 1 beside two
/// servers of weight 1000. Correct placement arithmetic, so not an error,
/// but describe flags it.
#[test]
fn describe_flags_endpoints_without_a_share() {
    let args = [
        "describe",
        "-p",
        "ketama",
        "-e",
        "light",
        "-e",
        "heavy1 weight=1000",
        "-e",
        "heavy2 weight=1000",
    ];
    let out = loadring(&args, "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let flagged: Vec<&str> = text
        .lines()
        .filter(|l| l.ends_with("NO SHARE"))
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(flagged, ["light"], "{text}");
    assert!(
        text.contains("1 endpoint(s) of weight >= 1 own no part"),
        "{text}"
    );

    let json = loadring(&[&args[..], &["--json"]].concat(), "");
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["unreached"], 1);
    let unreached: Vec<bool> = json["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["unreached"].as_bool().unwrap())
        .collect();
    assert_eq!(unreached, [true, false, false]);
}

/// Weights 1 and 3 are owed a quarter and three quarters: each share is
/// compared with that, not with a half.
#[test]
fn describe_compares_shares_with_their_weights() {
    let out = loadring(
        &[
            "describe",
            "-p",
            "c_md5",
            "-e",
            "a",
            "-e",
            "b weight=3",
            "--json",
        ],
        "",
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let endpoints = json["endpoints"].as_array().unwrap();
    assert_eq!(endpoints[0]["fair_share"], 0.25);
    assert_eq!(endpoints[1]["fair_share"], 0.75);
    let ratio: Vec<f64> = endpoints
        .iter()
        .map(|e| e["share_over_fair"].as_f64().unwrap())
        .collect();
    let share: Vec<f64> = endpoints
        .iter()
        .map(|e| e["share"].as_f64().unwrap())
        .collect();
    assert!((ratio[0] - share[0] * 4.0).abs() < 1e-12);
    assert!((ratio[1] - share[1] * 4.0 / 3.0).abs() < 1e-12);
    // Population std dev of two values: half their distance.
    let deviation = json["deviation"].as_f64().unwrap();
    assert!((deviation - (ratio[0] - ratio[1]).abs() / 2.0).abs() < 1e-12);
    // The split is close to fair (100 replicas per weight unit): far from
    // the 0.5 that comparing with equal shares gives.
    assert!(deviation < 0.1, "{deviation}");
}

/// Endpoints that share an address are told apart by their tags.
#[test]
fn describe_shows_the_tags_of_shared_addresses() {
    let out = loadring(
        &[
            "describe",
            "-p",
            "c_murmurhash",
            "-e",
            "10.0.0.1:80 tag=blue",
            "-e",
            "10.0.0.1:80 tag=green",
            "-e",
            "10.0.0.2:80 tag=solo",
        ],
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let labels: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("10.0.0."))
        .map(|l| l.split("  ").next().unwrap().trim_end())
        .collect();
    assert_eq!(
        labels,
        [
            "10.0.0.1:80 tag=blue",
            "10.0.0.1:80 tag=green",
            "10.0.0.2:80"
        ],
        "{text}"
    );
}

/// `loadring describe ... | head` must not panic when the reader leaves.
#[test]
fn describe_ends_quietly_when_its_reader_goes_away() {
    use std::io::Read;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_loadring"));
    cmd.args(["describe", "--policy", "c_md5"]);
    for i in 0..3000 {
        cmd.args(["-e", &format!("host{i}")]);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe is closed here, long before the table is written.
    let out = child.wait_with_output().unwrap();
    assert_eq!(&first[..6], b"policy");
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "no panic, no message"
    );
}

/// `loadring ... >&-`: a closed stdout is an error the command (or
/// `--help`, or `--version`) reports,
/// not output thrown away with exit 0 (Rust's runtime opens `/dev/null` in
/// its place, and `std::io::Stdout` takes `EBADF` for success). A command
/// with nothing to write has nothing to fail, as with coreutils; and
/// `>/dev/null` stays quiet.
#[test]
fn a_closed_stdout_is_an_error() {
    let run = |args: &[&str], stdin: &str, close: bool| -> Output {
        let mut cmd = Command::new("sh");
        // `exec` so that the shell's own stdout handling plays no part.
        let script = if close {
            r#"exec "$0" "$@" >&-"#
        } else {
            r#"exec "$0" "$@" >/dev/null"#
        };
        cmd.arg("-c")
            .arg(script)
            .arg(env!("CARGO_BIN_EXE_loadring"))
            .args(args);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        let _ = input.write_all(stdin.as_bytes());
        drop(input);
        child.wait_with_output().unwrap()
    };
    let place = ["place", "--policy", "c_md5", "-e", "a", "-e", "b"];
    let describe = ["describe", "--policy", "c_md5", "-e", "a", "-e", "b"];
    let describe_json = ["describe", "--policy", "c_md5", "-e", "a", "--json"];
    let simulate = [
        "simulate",
        "--policy",
        "rr",
        "-e",
        "a",
        "-e",
        "b",
        "--requests",
        "1000",
    ];
    let cases: [(&[&str], &str); 8] = [
        (&place, "k1\nk2\n"),
        (&describe, ""),
        (&describe_json, ""),
        (&simulate, ""),
        (&["shell"], "ADD a\n"),
        // clap's own output, the help and the version, as a command's.
        (&["--help"], ""),
        (&["--version"], ""),
        (&["place", "--help"], ""),
    ];
    for (args, stdin) in cases {
        let out = run(args, stdin, true);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: output: stdout is closed\n",
            "{args:?}"
        );
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let out = run(args, stdin, false);
        assert!(
            out.status.success(),
            "{args:?} >/dev/null: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Nothing to place, nothing written: no error.
    let out = run(&place, "", true);
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `describe --json` prints fractions rounded to 12 decimals: an endpoint
/// that owns the whole hash space has share 1 (brpc's ring sums its 100
/// arcs to 1.0000000000000002 in f64), a third of the fair share is
/// 0.333333333333.
#[test]
fn describe_json_prints_fractions_without_float_noise() {
    let json = |args: &[&str]| -> (String, serde_json::Value) {
        let mut all = vec!["describe", "--json"];
        all.extend(args);
        let out = loadring(&all, "");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        let value = serde_json::from_str(&text).unwrap();
        (text, value)
    };
    for policy in ["c_murmurhash", "c_ketama", "ring_hash", "dubbo"] {
        let (text, _) = json(&["--policy", policy, "-e", "a"]);
        for field in ["share", "share_times_n", "fair_share", "share_over_fair"] {
            assert!(
                text.contains(&format!("\"{field}\": 1.0,")),
                "{policy}: {field}\n{text}"
            );
        }
        assert!(text.contains("\"deviation\": 0.0,"), "{policy}\n{text}");
        assert!(text.contains("\"max_over_mean\": 1.0,"), "{policy}\n{text}");
    }
    // Maglev's 65537 slots over three endpoints: each share is a count of
    // slots over 65537, still read back from its 12 decimals.
    let (text, value) = json(&["--policy", "maglev", "-e", "a", "-e", "b", "-e", "c"]);
    let mut slots = 0.0;
    for e in value["endpoints"].as_array().unwrap() {
        assert_eq!(e["fair_share"], 0.333333333333, "{text}");
        let count = e["share"].as_f64().unwrap() * 65537.0;
        assert!((count - count.round()).abs() < 1e-6, "{count}");
        slots += count.round();
        let digits = |key: &str| {
            let x = e[key].as_f64().unwrap().to_string();
            x.split('.').nth(1).map_or(0, str::len)
        };
        for key in ["share", "share_times_n", "fair_share", "share_over_fair"] {
            assert!(digits(key) <= 12, "{key}: {e}");
        }
    }
    assert_eq!(slots, 65537.0);
}

/// Dubbo's and pixiu's rings, and libmemcached's unweighted continuum,
/// give every endpoint of weight >= 1 as many points whatever its weight:
/// describe's fair share is then an equal part each (weight 0 still none),
/// and says so; brpc's ring weighs.
#[test]
fn describe_fair_shares_follow_whether_the_policy_weighs() {
    let endpoints = ["-e", "a:80", "-e", "b:80 weight=3", "-e", "c:80 weight=0"];
    let note = "fair       an equal part each: the policy gives every endpoint of weight >= 1 \
                as many points, whatever its weight";
    for (policy, weighs, fair) in [
        ("dubbo", false, [0.5, 0.5, 0.0]),
        ("pixiu_ring", false, [0.5, 0.5, 0.0]),
        (
            "ketama:compat=libmemcached weighted=false",
            false,
            [0.5, 0.5, 0.0],
        ),
        ("zone_first over dubbo", false, [0.5, 0.5, 0.0]),
        ("c_murmurhash", true, [0.25, 0.75, 0.0]),
        ("ketama", true, [0.25, 0.75, 0.0]),
    ] {
        let mut args = vec!["describe", "--policy", policy, "--json"];
        args.extend(endpoints);
        let out = loadring(&args, "");
        assert!(
            out.status.success(),
            "{policy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["weighs"], weighs, "{policy}");
        let got: Vec<f64> = json["endpoints"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["fair_share"].as_f64().unwrap())
            .collect();
        assert_eq!(got, fair, "{policy}");
        // The ratios and their deviation are against those fair shares.
        let ratios: Vec<f64> = json["endpoints"].as_array().unwrap()[..2]
            .iter()
            .zip(fair)
            .map(|(e, fair)| e["share"].as_f64().unwrap() / fair)
            .collect();
        let mean = (ratios[0] + ratios[1]) / 2.0;
        let deviation = ((ratios[0] - mean).powi(2) + (ratios[1] - mean).powi(2)) / 2.0;
        let printed = json["deviation"].as_f64().unwrap();
        assert!(
            (printed - deviation.sqrt()).abs() < 1e-9,
            "{policy}: {printed}"
        );

        let mut args = vec!["describe", "--policy", policy];
        args.extend(endpoints);
        let text = String::from_utf8(loadring(&args, "").stdout).unwrap();
        assert_eq!(text.contains(note), !weighs, "{policy}\n{text}");
        let fair_column: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|w| w.ends_with(":80"))
            })
            .map(|l| l.split_whitespace().nth(3).unwrap())
            .collect();
        let want: Vec<String> = fair.iter().map(|f| format!("{:.3}%", f * 100.0)).collect();
        assert_eq!(fair_column, want, "{policy}\n{text}");
    }
}
