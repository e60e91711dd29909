//! The harness package's own pytest unit tests (src/eval/harness/tests), run with the
//! interpreter kforge uses. pytest is installed on first use into the build directory
//! (target/pytest-site), never into the user's environment or cache.

mod dev_python;
mod eval_common;

use dev_python::pytest_site;
use eval_common::interpreter;
use std::path::Path;
use std::process::Command;

#[test]
fn harness_unit_tests_pass() {
    let python = interpreter();
    let site = pytest_site(&python);
    let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/eval/harness");
    let path = std::env::join_paths([site.as_path(), harness.as_path()]).unwrap();
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&harness)
        .env("PYTHONPATH", path)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("TRITON_INTERPRET", "1")
        .output()
        .expect("pytest runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    println!("{text}");
    assert!(
        output.status.success(),
        "harness unit tests failed:\n{text}"
    );
    assert!(text.contains(" passed"), "pytest ran no test:\n{text}");
}
