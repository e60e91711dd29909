//! Python packages the test suite needs and kforge itself does not (the official MCP SDK,
//! the harness's type checker, pytest), installed by the tests that use them into the
//! build's target directory, never into the user's environment, caches or config.
//!
//! A pinned requirements file (`DevEnv`) gets a virtual environment of its own under
//! `CARGO_TARGET_TMPDIR`, once per content hash of the file, created from `python3` (3.10
//! or newer) on PATH under a lock, with pip's cache beside it. Only when pip cannot reach
//! a package registry does the test skip, saying so on the terminal; with
//! `KFORGE_TEST_REQUIRE_REGISTRY=1` (set by `.ci/run`; the older name
//! `KFORGE_TEST_REQUIRE_MCP_SDK=1` still works) that is a failure too.
//!
//! pytest is different: the harness's tests run under the harness's own interpreter, so it
//! goes into a `--target` directory for that interpreter (`pytest_site`).

#![allow(dead_code)]

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

/// The variable that turns a registry pip cannot reach into a failure; and its older name.
pub const REQUIRE_REGISTRY: &str = "KFORGE_TEST_REQUIRE_REGISTRY";
const REQUIRE_REGISTRY_OLD: &str = "KFORGE_TEST_REQUIRE_MCP_SDK";

/// Signs in pip's output that it could not reach the package index at all.
const UNREACHABLE: [&str; 9] = [
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "No route to host",
    "ConnectTimeoutError",
    "ProxyError",
    "Could not fetch URL",
];

/// A path in the repository.
pub fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A line on the terminal even while the test harness captures the test's output
/// (`eprintln!` is captured; a write to the stderr handle is not).
pub fn say(line: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("\n{line}\n").as_bytes());
}

/// Whether a registry pip cannot reach fails the test instead of skipping it.
pub fn registry_required() -> bool {
    [REQUIRE_REGISTRY, REQUIRE_REGISTRY_OLD]
        .iter()
        .any(|name| std::env::var_os(name).is_some_and(|v| v == "1"))
}

/// Whether pip's output says it never reached a package index.
pub fn registry_unreachable(pip_output: &str) -> bool {
    UNREACHABLE.iter().any(|sign| pip_output.contains(sign))
}

/// A pinned set of Python packages a test needs, in a virtual environment of its own.
pub struct DevEnv {
    /// The directory under `CARGO_TARGET_TMPDIR` that holds its environments, its lock and
    /// pip's cache.
    pub dir: &'static str,
    /// Its requirements file, relative to the repository root: every package pinned.
    pub requirements: &'static str,
    /// What it is, for the messages ("the MCP Python SDK").
    pub what: &'static str,
    /// The test that skips without it, named in the skip line.
    pub test: &'static str,
}

impl DevEnv {
    /// The environment's interpreter, installed when missing; `None` when pip cannot reach
    /// a registry and that is not required (the skip is said on the terminal).
    pub fn python(&self) -> Option<PathBuf> {
        let requirements = std::fs::read(manifest(self.requirements)).unwrap();
        let key = hex::encode(&Sha256::digest(&requirements)[..6]);
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(self.dir);
        std::fs::create_dir_all(&root).unwrap();
        // One installer at a time (test binaries of several builds may run at once).
        let lock = File::create(root.join("install.lock")).unwrap();
        lock.lock().unwrap();
        let env = root.join(format!("venv-{key}"));
        let python = env.join("bin/python");
        let ready = env.join(".installed");
        if ready.exists() {
            return Some(python);
        }
        if env.exists() {
            std::fs::remove_dir_all(&env).unwrap();
        }
        let venv = Command::new(base_python(self.what))
            .args(["-m", "venv"])
            .arg(&env)
            .output()
            .unwrap();
        assert!(
            venv.status.success(),
            "python3 -m venv {}: {}",
            env.display(),
            String::from_utf8_lossy(&venv.stderr)
        );
        let pip = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--no-input",
                "--only-binary=:all:",
                // pip names a connection failure only when it retries.
                "--retries",
                "2",
                "-r",
            ])
            .arg(manifest(self.requirements))
            .env("PIP_CACHE_DIR", root.join("pip-cache"))
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .env("PYTHONNOUSERSITE", "1")
            .output()
            .unwrap();
        if !pip.status.success() {
            let output = format!(
                "{}{}",
                String::from_utf8_lossy(&pip.stdout),
                String::from_utf8_lossy(&pip.stderr)
            );
            if registry_unreachable(&output) && !registry_required() {
                say(&format!(
                    "SKIPPED {}: pip cannot reach a package registry to install {} ({}); this \
                     test did not run ({REQUIRE_REGISTRY}=1 makes this a failure). Its last \
                     words:\n{}",
                    self.test,
                    self.what,
                    self.requirements,
                    last_lines(&output, 4)
                ));
                return None;
            }
            panic!("pip install -r {} failed:\n{output}", self.requirements);
        }
        std::fs::write(&ready, &requirements).unwrap();
        Some(python)
    }
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `python3` (or a versioned one) on PATH that is 3.10 or newer with the venv module.
fn base_python(what: &str) -> PathBuf {
    let candidates = [
        "python3",
        "python3.13",
        "python3.12",
        "python3.11",
        "python3.10",
    ];
    for name in candidates {
        let ok = Command::new(name)
            .args([
                "-c",
                "import sys, venv; sys.exit(sys.version_info < (3, 10))",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return PathBuf::from(name);
        }
    }
    panic!(
        "{what} needs Python 3.10 or newer with the venv module on PATH (as python3, or \
         python3.10 to python3.13): install it (Debian/Ubuntu: `apt install python3 \
         python3-venv`)"
    );
}

/// A directory with pytest for `python` (the harness's interpreter), put on its
/// `PYTHONPATH`: `target/pytest-site`, installed on first use under a lock.
pub fn pytest_site(python: &Path) -> PathBuf {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir");
    let site = target.join("pytest-site");
    let has_pytest = |path: &Path| {
        Command::new(python)
            .args(["-c", "import pytest"])
            .env("PYTHONPATH", path)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if has_pytest(&site) {
        return site;
    }
    let lock = File::create(target.join("pytest-site.lock")).unwrap();
    lock.lock().unwrap();
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
