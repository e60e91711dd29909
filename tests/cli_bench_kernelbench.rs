//! `kforge bench kernelbench TASKS_DIR` as a user runs it, on the CPU: a directory with a
//! good task, a task whose get_inputs() raises and one with a syntax error gives one row
//! per task in KernelBench's order, the bad ones as `task` rows with their reason (never
//! an abort), a summary, and the JSON file. The run gets its own cache and config dirs;
//! only the Python environment is shared with the user's.

mod eval_common;

use eval_common::{interpreter, text};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GOOD: &str = r#"import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.rand(64, 256)]


def get_init_inputs():
    return []
"#;

const INPUTS_RAISE: &str = r#"import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    raise ValueError("no inputs for you")


def get_init_inputs():
    return []
"#;

const SYNTAX_ERROR: &str = r#"import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x)
        return x


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
"#;

struct Workspace {
    root: tempfile::TempDir,
    python: PathBuf,
}

impl Workspace {
    fn new() -> Workspace {
        let root = tempfile::tempdir().unwrap();
        let tasks = root.path().join("level0");
        std::fs::create_dir_all(&tasks).unwrap();
        // Names chosen so KernelBench's numeric order (1, 2, 10) differs from text order.
        std::fs::write(tasks.join("1_Small_ReLU.py"), GOOD).unwrap();
        std::fs::write(tasks.join("2_Inputs_Raise.py"), INPUTS_RAISE).unwrap();
        std::fs::write(tasks.join("10_Syntax_Error.py"), SYNTAX_ERROR).unwrap();
        std::fs::write(tasks.join("README.md"), "not a task").unwrap();
        let kernels = root.path().join("kernels");
        std::fs::create_dir_all(&kernels).unwrap();
        let relu_ok =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kernels/relu_ok.py");
        std::fs::copy(relu_ok, kernels.join("1_Small_ReLU.py")).unwrap();
        Workspace {
            root,
            python: interpreter(),
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.root.path().join(relative)
    }

    fn bench(&self, extra: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_kforge"))
            .args(["bench", "kernelbench"])
            .arg(self.path("level0"))
            .args(["--cpu"])
            .args(extra)
            .env("KFORGE_PYTHON", &self.python)
            .env("KFORGE_CACHE_DIR", self.path("cache"))
            .env("KFORGE_CONFIG_DIR", self.path("config"))
            .current_dir(self.root.path())
            .output()
            .unwrap()
    }
}

/// The table row of `task`: the line that ends with its name.
fn row<'a>(stdout: &'a str, task: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.ends_with(&format!("  {task}")))
        .unwrap_or_else(|| panic!("no row for {task}:\n{stdout}"))
}

#[test]
fn every_task_gets_a_row_bad_ones_included_and_the_json_keeps_them() {
    let ws = Workspace::new();
    let json = ws.path("kb.json");
    let out = ws.bench(&[
        "--kernels",
        ws.path("kernels").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // Exit 1: the run completed, and some task checks failed.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");

    let good = row(&stdout, "1_Small_ReLU");
    let columns: Vec<&str> = good.split_whitespace().collect();
    assert_eq!(columns[0], "ok", "{good}");
    assert!(
        columns[1].parse::<f64>().unwrap() > 0.0,
        "wall seconds: {good}"
    );
    assert_eq!(
        &columns[2..6],
        ["-", "-", "-", "-"],
        "no timing or device memory on the CPU: {good}"
    );
    assert!(
        stdout.contains("    kernel 1_Small_ReLU.py: correct, "),
        "the kernel beside the task was evaluated:\n{stdout}"
    );

    let raises = row(&stdout, "2_Inputs_Raise");
    assert!(raises.starts_with("task "), "{raises}");
    assert!(
        stdout.contains("\n    the task's get_inputs() raised ValueError: no inputs for you\n"),
        "{stdout}"
    );
    let syntax = row(&stdout, "10_Syntax_Error");
    assert!(syntax.starts_with("task "), "{syntax}");
    assert!(
        stdout.contains("the task file has a syntax error at line 6"),
        "{stdout}"
    );

    // KernelBench's order: by number, so 10 comes after 2.
    let at = |needle: &str| stdout.find(needle).unwrap();
    assert!(at("  1_Small_ReLU\n") < at("  2_Inputs_Raise\n"));
    assert!(at("  2_Inputs_Raise\n") < at("  10_Syntax_Error\n"));
    assert!(!stdout.contains("README"), "{stdout}");

    for line in [
        "tasks checked: 3 (1 ok, 2 failed)",
        "failures by category:",
        "  task: 2",
        "kernels evaluated: 1 (1 correct)",
        "worst-case memory: - (not measured on the CPU)",
        "KernelBench vs kforge reference median: - (no timing on the CPU)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing {line:?}:\n{stdout}"
        );
    }
    assert!(stdout.contains("\n    2_Inputs_Raise: the task's get_inputs() raised ValueError"));
    assert!(stdout.contains("\n    10_Syntax_Error: the task file has a syntax error"));
    assert!(stdout.contains("\ntotal wall time: "), "{stdout}");

    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .expect("the JSON file is one document");
    assert_eq!(v["device"], "cpu");
    assert_eq!(v["interrupted"], false);
    assert!(v["versions"]["torch"].is_string(), "{v}");
    let tasks = v["tasks"].as_array().unwrap();
    let names: Vec<&str> = tasks.iter().map(|t| t["task"].as_str().unwrap()).collect();
    assert_eq!(names, ["1_Small_ReLU", "2_Inputs_Raise", "10_Syntax_Error"]);
    assert_eq!(tasks[0]["verdict"], "ok");
    assert!(tasks[0]["wall_s"].as_f64().unwrap() > 0.0);
    assert!(tasks[0]["reference"].is_null() && tasks[0]["kernelbench"].is_null());
    assert_eq!(tasks[0]["kernel"]["verdict"], "correct");
    assert_eq!(tasks[1]["verdict"], "task");
    assert!(
        tasks[1]["summary"]
            .as_str()
            .unwrap()
            .contains("ValueError: no inputs for you")
    );
    assert_eq!(tasks[2]["verdict"], "task");
    let summary = &v["summary"];
    assert_eq!(summary["tasks"], 3);
    assert_eq!(summary["ok"], 1);
    assert_eq!(summary["failures"][0]["category"], "task");
    assert_eq!(
        summary["failures"][0]["failures"].as_array().unwrap().len(),
        2
    );
    assert!(summary["largest_abs_difference_pct"].is_null());
    // Atomic write: nothing but the JSON file (and the run's own dirs) beside it.
    let mut beside: Vec<String> = std::fs::read_dir(ws.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    beside.sort();
    assert_eq!(beside, ["cache", "kb.json", "kernels", "level0"]);
}

#[test]
fn filter_and_limit_choose_the_tasks() {
    let ws = Workspace::new();
    let out = ws.bench(&["--filter", "_S", "--limit", "1"]);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains("kernelbench: 1 task(s) from "), "{stdout}");
    row(&stdout, "1_Small_ReLU");
    assert!(!stdout.contains("10_Syntax_Error"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l == "tasks checked: 1 (1 ok, 0 failed)"),
        "{stdout}"
    );

    let none = ws.bench(&["--filter", "no-such-task"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("no task files (*.py)"),
        "{}",
        text(&none.stderr)
    );
}
