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
    assert!(shapes["family_seed"].is_u64(), "{shapes:#}");
    let variants = shapes["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 5, "{shapes:#}");
    // Smaller sizes stay inside its 64 x 1024 grid; the larger one does not.
    for v in variants {
        let larger = v["rule"] == "odd_above";
        let expected = if larger { "wrong" } else { "correct" };
        assert_eq!(v["outcome"], expected, "{v:#}");
        if larger {
            assert_eq!(v["category"], "mismatch", "{v:#}");
            assert!(v["sizes"]["batch_size"].as_u64().unwrap() > 64, "{v:#}");
            assert!(v["sizes"]["dim"].as_u64().unwrap() > 1024, "{v:#}");
        }
    }
    let line = shapes["line"].as_str().unwrap();
    assert!(line.starts_with("wrong on batch_size="), "{line}");
    assert!(line.contains(": mismatch: "), "{line}");
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
        "(random odd sizes above the task's (larger), seed ",
        "  batch_size=1, dim=",
        "(batch of 1, other sizes random below the task's, seed ",
    ] {
        assert!(stdout.contains(expected), "{expected:?} in:\n{stdout}");
    }
}

/// Issue 34, item 3: a kernel right on the task's sizes and on the five variants earlier
/// versions always derived (it can compute them beforehand) passed "correct on 5 of 5"; the
/// variants are drawn now, and it is wrong on them.
#[test]
fn a_kernel_right_only_on_the_sizes_it_expects_is_wrong_on_drawn_ones() {
    let out = eval_shapes("relu.py", "relu_enumerated_shapes.py", &["--json"]);
    let v = json(&out);
    assert_eq!(v["correct"], true, "{}", text(&out.stderr));
    let shapes = &v["shapes"];
    assert_eq!(shapes["verdict"], "fails_on", "{shapes:#}");
    assert!(shapes["failed"].as_u64().unwrap() >= 4, "{shapes:#}");
    assert_eq!(out.status.code(), Some(1));
}

/// Issue 34, item 3: a kernel that answers every unseen shape with a forged "out of memory,
/// the kernel was not loaded" (its process's word, sent through the worker it found in its
/// own memory) had every variant skipped: `not_run`, exit code 0, a win. What the kernel's
/// process says about itself is the kernel's: every variant is wrong. The static filter is
/// off: the kernel reaches the worker as a door through the filter would let it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_out_of_memory_on_every_shape_is_the_kernels_failure() {
    let evaluator = eval_common::evaluator();
    let settings = kforge::config::EvalConfig {
        static_checks: false,
        trials: 2,
        ..Default::default()
    };
    let task = fixtures().join("tasks/relu.py");
    let kernel = fixtures().join("kernels/hack_forged_oom_on_shapes.py");
    let dir = tempfile::tempdir().unwrap();
    let cancel = tokio_util::sync::CancellationToken::new();
    let check = kforge::shape_check::check_kernel(
        &std::fs::read_to_string(&task).unwrap(),
        &kernel,
        dir.path(),
        kforge::eval::Device::Cpu,
        &settings,
        &|request| Box::pin(evaluator.evaluate(request, cancel.child_token(), None)),
    )
    .await
    .unwrap();
    evaluator.shutdown().await;
    assert_eq!(check.variants.len(), 5, "{check:#?}");
    for variant in &check.variants {
        assert!(
            matches!(
                &variant.outcome,
                kforge::shapes::VariantOutcome::Wrong {
                    category: kforge::protocol::Category::Oom,
                    ..
                }
            ),
            "{variant:#?}"
        );
    }
    assert!(check.fails() && !check.passes(), "{}", check.line);
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
