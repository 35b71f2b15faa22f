//! The workspace's test layout: each crate links one test binary,
//! `tests/main.rs`, which declares every file of its `tests/` directory as a
//! module. With `autotests = false` Cargo no longer finds test files by
//! itself, so a file left out of `main.rs` would silently never run.

use std::path::{Path, PathBuf};

/// The names `main.rs` declares with `mod NAME;` (a `#[path]` or `#[cfg]`
/// line above one does not matter here).
fn declared(main: &str) -> Vec<String> {
    main.lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// The modules `tests/` holds: `NAME.rs` files and `NAME/mod.rs` folders.
fn modules(tests: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if let Some(stem) = name.strip_suffix(".rs") {
            if stem != "main" {
                found.push(stem.to_string());
            }
        } else if path.join("mod.rs").is_file() {
            found.push(name);
        }
    }
    found.sort();
    found
}

fn crates_with_tests() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("tests").is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn every_test_file_is_a_module_of_its_main() {
    let crates = crates_with_tests();
    assert!(crates.len() >= 5, "{crates:?}");
    let mut problems = Vec::new();
    for dir in &crates {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        if !manifest.contains("autotests = false") || !manifest.contains("path = \"tests/main.rs\"")
        {
            problems.push(format!(
                "{name}/Cargo.toml: want `autotests = false` and one [[test]] at tests/main.rs"
            ));
        }
        let main = match std::fs::read_to_string(dir.join("tests/main.rs")) {
            Ok(text) => text,
            Err(e) => {
                problems.push(format!("{name}/tests/main.rs: {e}"));
                continue;
            }
        };
        let declared = declared(&main);
        for module in modules(&dir.join("tests")) {
            if !declared.contains(&module) {
                problems.push(format!(
                    "{name}/tests/{module}: not a `mod` of tests/main.rs, so it never runs"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
