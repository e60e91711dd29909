//! The evaluator on the CPU (Triton interpreter) against the fixture suite in
//! tests/fixtures/cases.toml: every category, the known evaluation hacks, bad tasks.
//! Uses the same interpreter resolution as users (KFORGE_PYTHON, config, python3 with
//! torch, else the managed environment, created on first use).

mod eval_common;

use eval_common::{evaluator, fixtures};
use std::time::Duration;

use kforge::config::{EvalConfig, Executor};
use kforge::eval::suite::{self, Manifest};
use kforge::eval::{Device, EvalError, EvalProgress, EvalRequest};
use kforge::protocol::Category;
use tokio_util::sync::CancellationToken;

fn settings() -> EvalConfig {
    EvalConfig {
        timeout_s: 60.0,
        ..EvalConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_suite_verdicts_on_cpu() {
    let manifest = Manifest::load(&fixtures().join("cases.toml")).unwrap();
    assert!(
        manifest.cases.len() >= 30,
        "the suite covers every category and hack"
    );
    let evaluator = evaluator();
    let outcomes = suite::run(&evaluator, &manifest, Device::Cpu, &settings()).await;
    evaluator.shutdown().await;
    println!("{}", suite::table(&outcomes));
    let failed: Vec<_> = outcomes.iter().filter(|o| o.problem.is_some()).collect();
    assert!(failed.is_empty(), "{}", suite::table(&outcomes));
    // Every category the CPU can produce appears at least once.
    for category in [
        "correct",
        "static_check",
        "syntax",
        "import",
        "compile",
        "out_of_resources",
        "runtime",
        "cuda_error",
        "oom",
        "mismatch",
        "torch_fallback",
        "timeout",
        "crash",
        "task",
    ] {
        assert!(
            outcomes.iter().any(|o| o.verdict == category),
            "no case produced {category}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_evaluation_kills_it_and_the_server_keeps_working() {
    let evaluator = evaluator();
    let f = fixtures();
    let hang = EvalRequest::new(
        f.join("tasks/relu.py"),
        f.join("kernels/relu_infinite_loop.py"),
        Device::Cpu,
        EvalConfig {
            timeout_s: 120.0,
            ..settings()
        },
    );
    let cancel = CancellationToken::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = {
        let evaluator = evaluator.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move { evaluator.evaluate(hang, cancel, Some(tx)).await })
    };
    // Wait until the child is really running, then cancel.
    while let Some(p) = rx.recv().await {
        if matches!(p, EvalProgress::Phase(ref s) if s.starts_with("correctness trial")) {
            break;
        }
    }
    let started = std::time::Instant::now();
    cancel.cancel();
    let outcome = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("cancel is prompt")
        .unwrap();
    assert!(matches!(outcome, Err(EvalError::Cancelled)), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(15));

    let ok = EvalRequest::new(
        f.join("tasks/relu.py"),
        f.join("kernels/relu_ok.py"),
        Device::Cpu,
        settings(),
    );
    let result = evaluator
        .evaluate(ok, CancellationToken::new(), None)
        .await
        .unwrap();
    assert!(result.correct, "{}", result.summary);

    // A job cancelled before it starts never runs.
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let queued = EvalRequest::new(
        f.join("tasks/relu.py"),
        f.join("kernels/relu_ok.py"),
        Device::Cpu,
        settings(),
    );
    assert!(matches!(
        evaluator.evaluate(queued, cancelled, None).await,
        Err(EvalError::Cancelled)
    ));
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_executor_gives_the_same_verdicts() {
    let evaluator = evaluator();
    let f = fixtures();
    let spawn = EvalConfig {
        executor: Executor::Spawn,
        // relu_segfault uses ctypes, which the static filter refuses: the crash path is
        // what this test is about.
        static_checks: false,
        ..settings()
    };
    for (kernel, expected) in [
        ("relu_ok.py", None),
        ("relu_segfault.py", Some(Category::Crash)),
        ("relu_identity.py", Some(Category::Mismatch)),
    ] {
        let request = EvalRequest::new(
            f.join("tasks/relu.py"),
            f.join("kernels").join(kernel),
            Device::Cpu,
            spawn.clone(),
        );
        let result = evaluator
            .evaluate(request, CancellationToken::new(), None)
            .await
            .unwrap();
        assert_eq!(result.category, expected, "{kernel}: {}", result.summary);
    }
    evaluator.shutdown().await;
}
