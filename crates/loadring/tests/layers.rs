//! The core's source layers: each folder of `src/` is one layer, and a file
//! imports (`crate::...` outside its test modules) only from its own layer or
//! a lower one, so that imports run one way and no two layers need each
//! other. Lowest first: the basic types at the top of `src/`, `util/`,
//! `hash/`, `inflight/`, `policy/`, `placement/`, `spec.rs`, `balancer/`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A file at the top of `src/` that is not named
/// here is a basic type (layer 0).
const LAYERS: [&str; 7] = [
    "util",
    "hash",
    "inflight",
    "policy",
    "placement",
    "spec",
    "balancer",
];

fn rank(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| *l == module)
        .map_or(0, |i| i + 1)
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of `text` without its line comments and its `#[cfg(test)] mod`
/// blocks (tests may reach anywhere).
fn compiled_code(text: &str) -> String {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let is_mod = after["#[cfg(test)]".len()..]
            .trim_start()
            .trim_start_matches("pub(crate) ")
            .starts_with("mod ");
        let brace = after.find(['{', ';']).unwrap();
        if !is_mod || after.as_bytes()[brace] == b';' {
            out.push_str("#[cfg(test)]");
            rest = &after["#[cfg(test)]".len()..];
            continue;
        }
        let mut depth = 0;
        let mut end = after.len();
        for (i, c) in after.char_indices().skip(brace) {
            depth += match c {
                '{' => 1,
                '}' => -1,
                _ => 0,
            };
            if depth == 0 {
                end = i + 1;
                break;
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// The names `lib.rs` re-exports at the crate root, with the layer each
/// comes from: `crate::LoadFactor` is an import of `util/`.
fn root_names(lib: &str) -> HashMap<String, usize> {
    let mut names = HashMap::new();
    for item in lib.split(';') {
        let Some(path) = item.trim().split("pub use ").nth(1) else {
            continue;
        };
        let module = path.split("::").next().unwrap().trim();
        let last = path.rsplit("::").next().unwrap();
        for name in last.split([',', '{', '}']).map(str::trim) {
            if !name.is_empty() {
                names.insert(name.to_string(), rank(module));
            }
        }
    }
    names
}

/// Every `crate::NAME` of `code`: the first name after `crate::` (a group
/// `crate::{a, b}` gives each).
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let group = match rest.strip_prefix('{') {
            Some(inner) => &inner[..inner.find('}').unwrap()],
            None => rest.split([',', ';', ' ', '\n']).next().unwrap(),
        };
        for part in group.split(',') {
            let name: String = part
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

/// `(file, what it imports)` for each import of a higher layer.
fn upward_imports() -> Vec<String> {
    let src = src();
    let roots = root_names(&compiled_code(
        &std::fs::read_to_string(src.join("lib.rs")).unwrap(),
    ));
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut problems = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let first = first.trim_end_matches(".rs");
        if first == "lib" {
            continue;
        }
        let mine = rank(first);
        let code = compiled_code(&std::fs::read_to_string(&file).unwrap());
        for name in crate_paths(&code) {
            let theirs = roots.get(&name).copied().unwrap_or_else(|| rank(&name));
            if theirs > mine {
                problems.push(format!(
                    "{} (layer {first}) imports crate::{name} (layer {})",
                    rel.display(),
                    LAYERS[theirs - 1]
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

#[test]
fn every_import_runs_to_the_same_layer_or_a_lower_one() {
    let problems = upward_imports();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_reader_sees_imports_test_modules_and_root_names() {
    let code = "use crate::policy::Picker;\n// crate::balancer\nfn f() {}\n\
                #[cfg(test)]\nmod tests {\n    use crate::balancer::Balancer;\n}\n\
                use crate::{util::params, Balancer};";
    let code = compiled_code(code);
    assert_eq!(crate_paths(&code), ["policy", "util", "Balancer"]);
    let lib = "pub use balancer::{Balancer, Candidate};\npub use util::bounded::LoadFactor;";
    let roots = root_names(lib);
    assert_eq!(roots["Balancer"], rank("balancer"));
    assert_eq!(roots["Candidate"], rank("balancer"));
    assert_eq!(roots["LoadFactor"], rank("util"));
    assert_eq!(rank("endpoint"), 0);
}
