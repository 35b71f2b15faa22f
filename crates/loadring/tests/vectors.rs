//! Reference placements: every row of every vector file in `tests/data/` must
//! come back from the balancer as recorded (brpc, Envoy, libketama, and
//! libmemcached observed on live memcached servers, nginx, HAProxy and
//! twemproxy observed live, Apache Dubbo, dubbo-go-pixiu).
//!
//! The files are found by reading the directory: a new vector file runs with
//! no code added, and a file that cannot run (an unknown policy, a missing
//! header, a bad row) fails the test instead of being skipped.

use std::path::{Path, PathBuf};

use loadring::{Balancer, Endpoint, PolicySpec, Request};

/// A vector file: `# policy: SPEC`, `# endpoint: ENDPOINT` lines, an optional
/// `# input: codes` (rows are request codes, not keys), then `input<TAB>endpoint` rows.
struct Vectors {
    policy: String,
    endpoints: Vec<String>,
    codes: bool,
    rows: Vec<(String, String)>,
}

fn parse(text: &str) -> Result<Vectors, String> {
    let mut v = Vectors {
        policy: String::new(),
        endpoints: Vec::new(),
        codes: false,
        rows: Vec::new(),
    };
    for (n, line) in text.lines().enumerate() {
        if let Some(p) = line.strip_prefix("# policy: ") {
            v.policy = p.to_string();
        } else if let Some(e) = line.strip_prefix("# endpoint: ") {
            v.endpoints.push(e.to_string());
        } else if let Some(m) = line.strip_prefix("# input: ") {
            match m {
                "codes" => v.codes = true,
                "keys" => v.codes = false,
                other => {
                    return Err(format!(
                        "line {}: input `{other}`: accepted codes, keys",
                        n + 1
                    ))
                }
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let (input, want) = line
                .split_once('\t')
                .ok_or_else(|| format!("line {}: not input<TAB>endpoint", n + 1))?;
            v.rows.push((input.to_string(), want.to_string()));
        }
    }
    if v.policy.is_empty() || v.endpoints.is_empty() || v.rows.is_empty() {
        return Err("incomplete: needs `# policy:`, `# endpoint:` lines and rows".into());
    }
    Ok(v)
}

/// Every row of a vector file through each way the library answers "where
/// does this go": the shared pick, a local handle's pick, the route without
/// a reservation, and the first candidate of the retry order. Ok is the
/// number of answers checked; Err says why the file cannot run or how many
/// answers differ.
fn check(text: &str) -> Result<usize, String> {
    let v = parse(text)?;
    let spec: PolicySpec = v.policy.parse().map_err(|e| format!("policy: {e}"))?;
    let endpoints = v
        .endpoints
        .iter()
        .map(|e| {
            e.parse::<Endpoint>()
                .map_err(|err| format!("endpoint: {err}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let balancer = Balancer::new(spec, endpoints).map_err(|e| format!("balancer: {e}"))?;
    let local = balancer.local();
    let mut wrong = Vec::new();
    for (input, want) in &v.rows {
        let req = if v.codes {
            Request::code(
                input
                    .parse()
                    .map_err(|e| format!("{input}: not a request code: {e}"))?,
            )
        } else {
            Request::key(input.as_str())
        };
        let fail = |path: &str, e: &dyn std::fmt::Display| format!("{input}: {path}: {e}");
        let pick = balancer.pick(&req).map_err(|e| fail("pick", &e))?;
        let local_pick = local.pick(&req).map_err(|e| fail("local pick", &e))?;
        let route = balancer
            .route(&req)
            .map_err(|e| fail("route", &e))?
            .ok_or_else(|| fail("route", &"no route (not a hashing policy?)"))?;
        let first = balancer
            .candidates(&req)
            .map_err(|e| fail("candidates", &e))?
            .next()
            .ok_or_else(|| fail("candidates", &"no first candidate"))?;
        for (path, got) in [
            ("pick", pick.addr()),
            ("local pick", local_pick.addr()),
            ("route", route.addr()),
            ("first candidate", first.addr()),
        ] {
            if got != want {
                wrong.push(format!("{input} -> {got} by {path} (want {want})"));
            }
        }
    }
    let answers = 4 * v.rows.len();
    if !wrong.is_empty() {
        return Err(format!(
            "{} of {answers} answers differ, first: {:?}",
            wrong.len(),
            &wrong[..wrong.len().min(5)]
        ));
    }
    drop(local);
    if balancer.total_in_flight() != 0 {
        return Err(format!(
            "{} requests still in flight after the checks",
            balancer.total_in_flight()
        ));
    }
    Ok(answers)
}

pub(crate) fn vector_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_vector_file_places_like_its_reference() {
    let files = vector_files();
    // The files recorded so far: a directory found empty or moved must not pass.
    assert!(files.len() >= 27, "{} vector files", files.len());
    let mut failures = Vec::new();
    let mut answers = 0;
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy();
        let result = std::fs::read_to_string(file)
            .map_err(|e| e.to_string())
            .and_then(|text| check(&text));
        match result {
            Ok(n) => answers += n,
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vector files fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
    assert!(answers > 0);
}

/// The runner itself: a file it cannot run is a failure, never a pass with
/// nothing checked.
#[test]
fn a_vector_file_that_cannot_run_is_a_failure() {
    let rows = "a\t10.0.0.1:80\n";
    let cases = [
        (
            "# policy: no_such_policy\n# endpoint: 10.0.0.1:80\n",
            "policy: ",
        ),
        ("# endpoint: 10.0.0.1:80\n", "incomplete"),
        ("# policy: c_murmurhash\n", "incomplete"),
        (
            "# policy: c_murmurhash\n# endpoint: 10.0.0.1:80\n# input: bytes\n",
            "input `bytes`",
        ),
        ("# policy: rr\n# endpoint: 10.0.0.1:80\n", "no route"),
    ];
    for (head, want) in cases {
        let err = check(&format!("{head}{rows}")).unwrap_err();
        assert!(err.contains(want), "{head:?}: {err:?} lacks {want:?}");
    }
    let err = check("# policy: c_murmurhash\n# endpoint: 10.0.0.1:80\nno tab here\n").unwrap_err();
    assert!(err.contains("line 3"), "{err}");
    let err = check("# policy: c_murmurhash\n# endpoint: 10.0.0.1:80\n# endpoint: 10.0.0.2:80\nk\t10.0.0.9:80\n")
        .unwrap_err();
    assert!(err.contains("4 of 4 answers differ"), "{err}");
    let ok = check("# policy: c_murmurhash\n# endpoint: 10.0.0.1:80\nk\t10.0.0.1:80\n");
    assert_eq!(ok, Ok(4));
}
