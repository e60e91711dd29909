//! Judges started ahead (`[eval] start_ahead`, the harness's `ahead.py`; issue 38): after a
//! session's candidate the server starts the next one's judge and worker while the model
//! writes it, and the candidate's evaluation runs only the kernel's phases. What must hold:
//! - a candidate after another is judged by the processes started ahead, and its verdict is
//!   its own: its kernel, its static report, its notes once each, a wrong kernel still wrong,
//!   a crashing one still a crash said as such;
//! - a kernel refused statically leaves the spare for the next candidate;
//! - a session's task check starts its first candidate's;
//! - a request unlike the spare (other settings, or not a session's candidate) gets fresh
//!   processes;
//! - nothing a kernel writes reaches the candidate after it, whose worker was started ahead.
//!
//! They run on the CPU (Triton's interpreter), as CI does.

mod eval_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use eval_common::{
    assert_found_nothing, assert_planted, evaluator, fixtures, kernel_from, plant_and_find,
};
use kforge::config::EvalConfig;
use kforge::eval::{Device, EvalRequest, Evaluator};
use kforge::protocol::{Category, EvalResult};
use tokio_util::sync::CancellationToken;

fn settings() -> EvalConfig {
    EvalConfig {
        timeout_s: 120.0,
        ..EvalConfig::default()
    }
}

/// The static filter off: the kernel meets the sandbox and the judge alone.
fn unfiltered() -> EvalConfig {
    EvalConfig {
        static_checks: false,
        ..settings()
    }
}

fn kernel(name: &str) -> PathBuf {
    fixtures().join("kernels").join(name)
}

/// A session's candidate for the fixture task `task`.
async fn candidate(
    evaluator: &Evaluator,
    task: &str,
    kernel: &Path,
    settings: EvalConfig,
) -> EvalResult {
    let mut request = EvalRequest::new(
        fixtures().join("tasks").join(task),
        kernel,
        Device::Cpu,
        settings,
    );
    request.session_candidate = true;
    evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
        .unwrap()
}

/// The model writing the next candidate: the time a spare has to start.
async fn answer_gap() {
    tokio::time::sleep(Duration::from_secs(6)).await;
}

/// Seconds of the evaluation's start that ran before its request; None: started with it.
fn ahead(result: &EvalResult) -> Option<f64> {
    result.server_phases_s.get("ahead").copied()
}

/// `result` was judged by the processes started ahead, and its verdict is `category`.
fn judged_ahead_as(result: &EvalResult, category: Category) {
    assert!(ahead(result).is_some(), "{:?}", result.server_phases_s);
    assert_eq!(result.category, Some(category), "{}", result.summary);
}

fn each_note_once(result: &EvalResult) {
    for note in &result.notes {
        assert_eq!(
            result.notes.iter().filter(|n| *n == note).count(),
            1,
            "a note twice: {:?}",
            result.notes
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_after_another_is_judged_by_the_processes_started_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let evaluator = evaluator();
    let first = candidate(&evaluator, "relu.py", &kernel("relu_ok.py"), settings()).await;
    assert!(first.correct, "{} {}", first.summary, first.log);
    assert_eq!(ahead(&first), None, "nothing was started before the first");

    answer_gap().await;
    let renamed = kernel_from("relu_ok.py", dir.path(), &[("relu_kernel", "renamed_relu")]);
    let second = candidate(&evaluator, "relu.py", &renamed, settings()).await;
    assert!(second.correct, "{} {}", second.summary, second.log);
    assert!(ahead(&second).is_some(), "{:?}", second.server_phases_s);
    // Its checking code ran once before the kernel came (judge/rehearsal.py); the first's did not.
    assert!(
        second.phases_s.contains_key("rehearsal"),
        "{:?}",
        second.phases_s
    );
    assert!(
        !first.phases_s.contains_key("rehearsal"),
        "{:?}",
        first.phases_s
    );
    assert_eq!(second.static_report.jit_kernels, ["renamed_relu"]);
    assert_eq!(
        second.notes, first.notes,
        "the same notes as a judge started with its request"
    );
    each_note_once(&second);
    assert_eq!(second.trials.len(), first.trials.len());

    answer_gap().await;
    let wrong = candidate(&evaluator, "relu.py", &kernel("relu_wrong.py"), settings()).await;
    judged_ahead_as(&wrong, Category::Mismatch);

    // Refused before any process: the spare started after the wrong kernel stays for the next.
    let syntax = candidate(&evaluator, "relu.py", &kernel("relu_syntax.py"), settings()).await;
    assert_eq!(
        syntax.category,
        Some(Category::Syntax),
        "{}",
        syntax.summary
    );
    let crashing = kernel("relu_segfault.py");
    let segfault = || candidate(&evaluator, "relu.py", &crashing, unfiltered());
    let crash = segfault().await;
    // Other settings than the spare's: fresh processes, and the crash said as a crash.
    assert_eq!(ahead(&crash), None, "{:?}", crash.server_phases_s);
    assert_eq!(crash.category, Some(Category::Crash), "{}", crash.summary);

    answer_gap().await;
    let crash_ahead = segfault().await;
    judged_ahead_as(&crash_ahead, Category::Crash);
    assert_eq!(crash_ahead.summary, crash.summary);

    // The next candidate at once: its spare still starts, and gets the kernel when ready.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let hurried = segfault().await;
    judged_ahead_as(&hurried, Category::Crash);
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_task_check_starts_its_first_candidates_judge() {
    let evaluator = evaluator();
    let mut check =
        EvalRequest::task_check(fixtures().join("tasks/relu.py"), Device::Cpu, settings());
    check.session_candidate = true;
    let checked = evaluator
        .evaluate(check, CancellationToken::new(), None)
        .await
        .unwrap();
    assert!(checked.correct, "{}", checked.summary);
    answer_gap().await;
    let first = candidate(&evaluator, "relu.py", &kernel("relu_ok.py"), settings()).await;
    assert!(first.correct, "{} {}", first.summary, first.log);
    assert!(ahead(&first).is_some(), "{:?}", first.server_phases_s);
    assert_eq!(first.static_report.jit_kernels, ["relu_kernel"]);
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_unlike_the_spare_gets_processes_of_its_own() {
    let evaluator = evaluator();
    let ok = kernel("relu_ok.py");
    let first = candidate(&evaluator, "relu.py", &ok, settings()).await;
    assert!(first.correct, "{}", first.summary);
    answer_gap().await;
    // Not a session's candidate (`kforge eval`): never a spare's, and it leaves none.
    let request = EvalRequest::new(
        fixtures().join("tasks/relu.py"),
        &ok,
        Device::Cpu,
        settings(),
    );
    let by_hand = evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
        .unwrap();
    assert!(by_hand.correct, "{}", by_hand.summary);
    assert_eq!(ahead(&by_hand), None, "{:?}", by_hand.server_phases_s);
    answer_gap().await;
    let after = candidate(&evaluator, "relu.py", &ok, settings()).await;
    assert_eq!(ahead(&after), None, "{:?}", after.server_phases_s);
    // Another task: the spare is not its judge.
    answer_gap().await;
    let other = candidate(
        &evaluator,
        "softmax.py",
        &kernel("softmax_ok.py"),
        settings(),
    )
    .await;
    assert!(other.correct, "{}", other.summary);
    assert_eq!(ahead(&other), None, "{:?}", other.server_phases_s);
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_kernel_writes_reaches_the_candidate_started_ahead_after_it() {
    let probe = tempfile::tempdir().unwrap();
    let (plant, find) = plant_and_find(probe.path());
    let evaluator = evaluator();
    let planted = candidate(&evaluator, "relu.py", &plant, unfiltered()).await;
    assert_planted(&planted);
    answer_gap().await;
    let found = candidate(&evaluator, "relu.py", &find, unfiltered()).await;
    assert!(ahead(&found).is_some(), "{:?}", found.server_phases_s);
    assert_found_nothing(&found);
    evaluator.shutdown().await;
}
