//! `kforge eval --shapes` on the CPU (Triton's interpreter): the real evaluator re-checks a
//! kernel on the task's size variants. A kernel written for the task's own sizes is refused
//! on the variant it cannot handle, with the shape and the judge's reason; an honest kernel
//! passes every variant; a task without size constants says so.

mod eval_common;

use std::process::Output;

use eval_common::{eval_fixture, fixtures, text};

fn eval_shapes(task: &str, kernel: &str, extra: &[&str]) -> Output {
    let mut args = vec!["--shapes", "--trials", "2"];
    args.extend_from_slice(extra);
    eval_fixture(task, kernel, &args)
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}): {}", text(&out.stderr)))
}

#[test]
fn a_kernel_with_a_hard_coded_grid_is_correct_on_the_task_and_refused_on_a_larger_shape() {
    let out = eval_shapes("relu.py", "relu_hardcoded_grid.py", &["--json"]);
    let v = json(&out);
    // The task's own sizes pass: the verdict alone would call it a win.
    assert_eq!(v["correct"], true, "{}", text(&out.stderr));
    let shapes = &v["shapes"];
    assert_eq!(shapes["verdict"], "fails_on", "{shapes:#}");
    assert_eq!(shapes["original"]["batch_size"], 64);
    assert_eq!(shapes["original"]["dim"], 1024);
    let variants = shapes["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 5, "{shapes:#}");
    // Smaller sizes stay inside its 64 x 1024 grid; the larger one does not.
    for v in variants {
        let larger = v["rule"] == "odd_five_quarters";
        let expected = if larger { "wrong" } else { "correct" };
        assert_eq!(v["outcome"], expected, "{v:#}");
        if larger {
            assert_eq!(v["category"], "mismatch", "{v:#}");
            assert_eq!(v["sizes"]["batch_size"], 81);
            assert_eq!(v["sizes"]["dim"], 1281);
        }
    }
    let line = shapes["line"].as_str().unwrap();
    assert!(
        line.starts_with("wrong on batch_size=81, dim=1281: mismatch: "),
        "{line}"
    );
    assert!(line.ends_with("(wrong on 1 of 5 unseen shapes)"), "{line}");
    // Not a win: the exit code is a wrong kernel's.
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn an_honest_kernel_is_correct_on_every_shape_and_the_verdict_says_so() {
    let out = eval_shapes("relu.py", "relu_ok.py", &[]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in [
        "unseen shapes correct on 5 of 5 unseen shapes\n",
        "  batch_size=81, dim=1281 (an odd size near five quarters (larger), seed 46): correct\n",
        "  batch_size=1, dim=1024 (batch of 1, seed 47): correct\n",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in:\n{stdout}");
    }
}

#[test]
fn a_task_whose_sizes_are_not_constants_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let relu = std::fs::read_to_string(fixtures().join("tasks/relu.py")).unwrap();
    let literal = relu
        .replace("batch_size = 64\ndim = 1024\n", "")
        .replace("torch.rand(batch_size, dim)", "torch.rand(64, 1024)");
    assert_ne!(literal, relu);
    let task = dir.path().join("relu_literal.py");
    std::fs::write(&task, literal).unwrap();
    let out = eval_shapes(task.to_str().unwrap(), "relu_ok.py", &["--json"]);
    let v = json(&out);
    assert_eq!(v["correct"], true, "{}", text(&out.stderr));
    assert_eq!(v["shapes"]["verdict"], "not_variable", "{:#}", v["shapes"]);
    assert!(
        v["shapes"]["line"]
            .as_str()
            .unwrap()
            .contains("module-level integer constants"),
        "{:#}",
        v["shapes"]
    );
    assert_eq!(v["shapes"]["variants"].as_array().unwrap().len(), 0);
    assert_eq!(out.status.code(), Some(0));
}
