//! The harness package's own pytest unit tests (src/eval/harness/tests), run with the
//! interpreter kforge uses. pytest is installed on first use into the build directory
//! (target/pytest-site), never into the user's environment or cache.

mod eval_common;

use eval_common::interpreter;
use std::path::{Path, PathBuf};
use std::process::Command;

fn pytest_site(python: &Path) -> PathBuf {
    let site = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("pytest-site");
    let has_pytest = |path: &Path| {
        Command::new(python)
            .args(["-c", "import pytest"])
            .env("PYTHONPATH", path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !has_pytest(&site) {
        let status = Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg("--target")
            .arg(&site)
            .arg("pytest>=8,<10")
            .status()
            .expect("pip runs");
        assert!(
            status.success(),
            "pip could not install pytest into {}",
            site.display()
        );
    }
    site
}

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
