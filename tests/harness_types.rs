//! The harness's type check: `mypy --strict` (pinned with everything it installs in
//! `src/eval/harness/requirements-dev.txt`) over the `kforge_harness` package and its
//! tests, as `src/eval/harness/mypy.ini` configures it, run with `--python-executable` set
//! to the interpreter the harness runs on (the one the other harness tests use), so that
//! torch's own annotations are what the harness is checked against; pytest's come from the
//! directory `harness_pytest` installs it into.
//!
//! mypy is a dev dependency of this test only, installed once per requirements file into a
//! virtual environment under the build's target directory (`tests/dev_python/`: skipped,
//! loudly, only where pip cannot reach a registry; `KFORGE_TEST_REQUIRE_REGISTRY=1`, set by
//! `.ci/run`, makes that a failure). mypy's cache lives beside it.
//!
//! Every module is annotated and checked (issue 37): the test fails where mypy.ini excludes
//! one again, by an `ignore_errors = True` section or an `untyped_calls_exclude` list.

mod dev_python;
mod eval_common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use dev_python::{DevEnv, manifest, pytest_site, say};
use eval_common::{interpreter, text};

const MYPY: DevEnv = DevEnv {
    dir: "harness-types",
    requirements: "src/eval/harness/requirements-dev.txt",
    what: "the harness's type checker (mypy)",
    test: "harness_types",
};

const HARNESS: &str = "src/eval/harness";

/// The section of mypy.ini whose modules are not checked yet: `[mypy-a,b,...]` holding
/// `ignore_errors = True`.
fn excluded_section(ini: &str) -> BTreeSet<String> {
    let mut excluded = BTreeSet::new();
    let mut header: Option<&str> = None;
    for line in ini.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            header = name.strip_prefix("mypy-");
        } else if let Some(modules) = header {
            let setting: Vec<&str> = line.split('=').map(str::trim).collect();
            if setting == ["ignore_errors", "True"] {
                excluded.extend(modules.split(',').map(|m| m.trim().to_string()));
            }
        }
    }
    excluded
}

/// The `[mypy]` section's `untyped_calls_exclude` list (a value over several lines).
fn untyped_calls_exclude(ini: &str) -> BTreeSet<String> {
    let mut value = String::new();
    let mut inside = false;
    for line in ini.lines() {
        let continued = line.starts_with([' ', '\t']);
        if inside && !continued {
            break;
        }
        if let Some(rest) = line.trim().strip_prefix("untyped_calls_exclude") {
            inside = true;
            value.push_str(rest.trim_start().trim_start_matches('='));
        } else if inside {
            value.push_str(line);
        }
        value.push(',');
    }
    value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty() && !m.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The Python files mypy.ini's `files` cover: the package and the tests.
fn python_files(harness: &Path) -> usize {
    ["kforge_harness", "tests"]
        .iter()
        .map(|dir| python_files_under(&harness.join(dir)))
        .sum()
}

/// The `.py` files under `dir`, its subpackages (the judge's `judge/`) included.
fn python_files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .map(|path| {
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "__pycache__") {
                    0
                } else {
                    python_files_under(&path)
                }
            } else {
                usize::from(path.extension().is_some_and(|e| e == "py"))
            }
        })
        .sum()
}

#[test]
fn the_exclusion_lists_are_read_from_the_config() {
    let ini = "[mypy]\nstrict = True\nuntyped_calls_exclude =\n    a.b,\n    c\nwarn = x\n\
               [mypy-t]\nignore_missing_imports = True\n[mypy-a.b,c]\nignore_errors = True\n";
    let both: BTreeSet<String> = ["a.b", "c"].map(String::from).into();
    assert_eq!(excluded_section(ini), both);
    assert_eq!(untyped_calls_exclude(ini), both);
    assert!(excluded_section("[mypy]\nstrict = True\n").is_empty());
}

#[test]
fn the_harness_type_checks_strictly() {
    let harness = manifest(HARNESS);
    let ini = std::fs::read_to_string(harness.join("mypy.ini")).unwrap();
    let excluded = excluded_section(&ini);
    let untyped = untyped_calls_exclude(&ini);
    assert!(
        excluded.is_empty() && untyped.is_empty(),
        "mypy.ini takes modules out of the check (`ignore_errors = True`: {excluded:?}; \
         `untyped_calls_exclude`: {untyped:?}): every module of the harness is annotated and \
         checked"
    );
    let Some(mypy) = MYPY.python() else {
        return;
    };
    let python = interpreter();
    let site = pytest_site(&python);
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("harness-types/mypy-cache");
    let started = Instant::now();
    // `-I`: mypy's own process ignores PYTHONPATH; the harness's interpreter, which mypy
    // asks for its search path, sees pytest through it.
    let out = Command::new(&mypy)
        .args(["-I", "-m", "mypy", "--config-file", "mypy.ini"])
        .arg("--python-executable")
        .arg(&python)
        .arg("--cache-dir")
        .arg(&cache)
        .current_dir(&harness)
        .env("PYTHONPATH", &site)
        .env_remove("MYPYPATH")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let output = format!("{}{}", text(&out.stdout), text(&out.stderr));
    let checked = python_files(&harness);
    say(&format!(
        "harness_types: mypy --strict over {checked} files in {seconds:.1} s"
    ));
    assert!(
        out.status.success(),
        "mypy --strict found errors:\n{output}"
    );
    let expected = format!("Success: no issues found in {checked} source files");
    assert!(
        output.contains(&expected),
        "mypy did not check every file of the package and its tests ({expected:?}):\n{output}"
    );
}
