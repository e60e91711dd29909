//! `kforge mcp` driven by a client nobody here wrote: the official MCP Python SDK
//! (`mcp`, pinned with everything it installs in `tests/mcp_sdk/requirements.txt`) runs
//! `tests/mcp_sdk/client.py` against the built binary: connect and negotiate, list the
//! tools, a CPU `task_check`, `eval` with progress, a failing kernel, the session tools,
//! and a cancelled evaluation followed by another one. The SDK checks every structured
//! result against the tool's outputSchema.
//!
//! The SDK is a dev dependency of this test only. The test installs it itself, once per
//! requirements file, into a virtual environment under the build's target directory
//! (`CARGO_TARGET_TMPDIR`), created from `python3` (3.10 or newer) on PATH with pip's
//! cache beside it: nothing is written into the user's caches or config. Only when pip
//! cannot reach a package registry does the test skip, saying so on the terminal; with
//! `KFORGE_TEST_REQUIRE_MCP_SDK=1` (set by `.ci/run`) that is a failure too.

mod eval_common;

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use eval_common::{fixtures, interpreter, test_cache, test_config, text};
use sha2::{Digest, Sha256};

const REQUIREMENTS: &str = "tests/mcp_sdk/requirements.txt";

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

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A line on the terminal even while the test harness captures the test's output
/// (`eprintln!` is captured; a write to the stderr handle is not).
fn say(line: &str) {
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("\n{line}\n").as_bytes());
}

/// `python3` (or a versioned one) on PATH that is 3.10 or newer, as the SDK needs.
fn base_python() -> PathBuf {
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
        "the MCP SDK test needs Python 3.10 or newer with the venv module on PATH (as \
         python3, or python3.10 to python3.13): install it (Debian/Ubuntu: `apt install \
         python3 python3-venv`)"
    );
}

/// The SDK's environment's interpreter, installed when missing; `None` when pip cannot
/// reach a registry and the SDK is not required.
fn sdk_python() -> Option<PathBuf> {
    let requirements = std::fs::read(manifest(REQUIREMENTS)).unwrap();
    let key = hex::encode(&Sha256::digest(&requirements)[..6]);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-sdk");
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
    let venv = Command::new(base_python())
        .args(["-m", "venv"])
        .arg(&env)
        .output()
        .unwrap();
    assert!(
        venv.status.success(),
        "python3 -m venv {}: {}",
        env.display(),
        text(&venv.stderr)
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
        .arg(manifest(REQUIREMENTS))
        .env("PIP_CACHE_DIR", root.join("pip-cache"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .env("PYTHONNOUSERSITE", "1")
        .output()
        .unwrap();
    if !pip.status.success() {
        let output = format!("{}{}", text(&pip.stdout), text(&pip.stderr));
        let unreachable = UNREACHABLE.iter().any(|sign| output.contains(sign));
        let required = std::env::var_os("KFORGE_TEST_REQUIRE_MCP_SDK").is_some_and(|v| v == "1");
        if unreachable && !required {
            say(&format!(
                "SKIPPED mcp_sdk: pip cannot reach a package registry to install the MCP \
                 Python SDK ({REQUIREMENTS}); this test did not run. Its last words:\n{}",
                output
                    .lines()
                    .skip(output.lines().count().saturating_sub(4))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
            return None;
        }
        panic!("pip install -r {REQUIREMENTS} failed:\n{output}");
    }
    std::fs::write(&ready, &requirements).unwrap();
    Some(python)
}

#[test]
fn the_official_python_sdk_drives_kforge_mcp() {
    let Some(python) = sdk_python() else {
        return;
    };
    let out = Command::new(python)
        .arg(manifest("tests/mcp_sdk/client.py"))
        .env("KFORGE_BIN", env!("CARGO_BIN_EXE_kforge"))
        .env("KFORGE_FIXTURES", fixtures())
        .env("KFORGE_CACHE_DIR", test_cache())
        .env("KFORGE_CONFIG_DIR", test_config())
        .env("KFORGE_PYTHON", interpreter())
        .env("PYTHONNOUSERSITE", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let report = stdout
        .lines()
        .find_map(|l| l.strip_prefix("MCP-SDK-REPORT "))
        .unwrap_or_else(|| panic!("no report: {stdout}\n{stderr}"));
    let report: serde_json::Value = serde_json::from_str(report).unwrap();
    assert_eq!(report["protocol_version"], "2025-11-25", "{report}");
    eprintln!("{report}");
}
