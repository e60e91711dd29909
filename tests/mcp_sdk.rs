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
//! `KFORGE_TEST_REQUIRE_REGISTRY=1` (set by `.ci/run`) that is a failure too
//! (`tests/dev_python/`, shared with the other tests that install Python packages).

mod dev_python;
mod eval_common;

use std::process::Command;

use dev_python::{DevEnv, manifest};
use eval_common::{fixtures, interpreter, test_cache, test_config, text};

/// The SDK and everything it installs, pinned.
const SDK: DevEnv = DevEnv {
    dir: "mcp-sdk",
    requirements: "tests/mcp_sdk/requirements.txt",
    what: "the MCP Python SDK",
    test: "mcp_sdk",
};

#[test]
fn the_official_python_sdk_drives_kforge_mcp() {
    let Some(python) = SDK.python() else {
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
