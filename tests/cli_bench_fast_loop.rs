//! `kforge bench fast-loop TASK KERNEL` as a user runs it, on the CPU (issue 38): the by-hand
//! `kforge eval` with its wall, verdict and phases, a session's warm candidates each split
//! into correctness trials and the rest, the judge's phases, and both CPU targets stated;
//! `--kernelbench` on the CPU is refused with its reason before anything runs. A small task
//! (the fixtures' 64x1024 ReLU) keeps it quick; the run gets its own cache and config dirs.

mod eval_common;

use eval_common::{interpreter, text};
use std::path::Path;
use std::process::{Command, Output};

fn fast_loop(root: &Path, extra: &[&str]) -> Output {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args(["bench", "fast-loop"])
        .arg(fixtures.join("tasks/relu.py"))
        .arg(fixtures.join("kernels/relu_ok.py"))
        .args(["--cpu"])
        .args(extra)
        .env("KFORGE_PYTHON", interpreter())
        .env("KFORGE_CACHE_DIR", root.join("cache"))
        .env("KFORGE_CONFIG_DIR", root.join("config"))
        .current_dir(root)
        .output()
        .unwrap()
}

#[test]
fn the_by_hand_run_and_warm_candidates_are_printed_with_the_cpu_targets() {
    let root = tempfile::tempdir().unwrap();
    let out = fast_loop(root.path(), &["--candidates", "2"]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let by_hand = stdout
        .lines()
        .find(|l| l.starts_with("by hand: `kforge eval TASK KERNEL` "))
        .unwrap_or_else(|| panic!("no by-hand line:\n{stdout}"));
    assert!(by_hand.ends_with("s wall, correct"), "{by_hand}");
    assert!(
        stdout.contains("  phases (s): ") && stdout.contains("correctness "),
        "the by-hand run's phases:\n{stdout}"
    );
    assert!(
        stdout.contains("target (CPU): a correct verdict within 90 s: met"),
        "{stdout}"
    );
    for candidate in ["1", "2"] {
        let row = stdout
            .lines()
            .find(|l| {
                l.trim_start().starts_with(&format!("{candidate} ")) && l.ends_with("correct")
            })
            .unwrap_or_else(|| panic!("no row for candidate {candidate}:\n{stdout}"));
        let columns: Vec<f64> = row
            .split_whitespace()
            .skip(1)
            .take(3)
            .map(|c| c.parse().unwrap())
            .collect();
        // wall = correctness + beyond correctness, as printed (two decimals each)
        assert!((columns[0] - columns[1] - columns[2]).abs() < 0.02, "{row}");
    }
    assert!(
        stdout.contains("median (candidates 2..): wall "),
        "{stdout}"
    );
    assert!(
        stdout.contains("target (CPU): at most 1 s a candidate beyond its correctness trials"),
        "{stdout}"
    );
}

#[test]
fn kernelbench_beside_a_cpu_run_is_refused_before_anything_runs() {
    let root = tempfile::tempdir().unwrap();
    let out = fast_loop(
        root.path(),
        &["--kernelbench", root.path().to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("--kernelbench needs a GPU"),
        "{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("by hand"), "nothing ran: {stdout}");
}
