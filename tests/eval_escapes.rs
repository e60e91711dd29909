//! Issue 20's escapes out of the sandbox, each against a live target on the host, with the
//! static filter off (only the sandbox and the judge stand), and refused by the static filter
//! when it is on:
//! - symlinks planted under the names lent buffers used to have never lead the judge to a
//!   host file (item 1);
//! - a kernel cannot get a host file into its log, which the repair prompt would send to
//!   the model (item 2);
//! - nothing a kernel writes (its Triton cache included) reaches the next evaluation
//!   (item 3);
//! - a kernel cannot stop or kill the process that forks the workers (item 4).
//!
//! They run on the CPU (Triton's interpreter); `KFORGE_TEST_DEVICE=cuda:0` runs them on a GPU
//! (docs/benchmarks.md, "Evaluator trust, round 2", says where that was done).

mod eval_common;

use eval_common::{
    assert_found_nothing, assert_planted, evaluator, fixtures, kernel_from, plant_and_find,
};
use std::path::Path;

use kforge::config::EvalConfig;
use kforge::eval::{Device, EvalRequest, Evaluator};
use kforge::protocol::{Category, EvalResult};
use tokio_util::sync::CancellationToken;

fn settings(static_checks: bool) -> EvalConfig {
    EvalConfig {
        timeout_s: 120.0,
        static_checks,
        ..EvalConfig::default()
    }
}

/// The CPU, or the device `KFORGE_TEST_DEVICE` names (`cuda:0`).
fn device() -> Device {
    std::env::var("KFORGE_TEST_DEVICE")
        .ok()
        .and_then(|name| Device::parse(&name))
        .unwrap_or(Device::Cpu)
}

async fn evaluate(
    evaluator: &Evaluator,
    task: &str,
    kernel: &Path,
    static_checks: bool,
) -> EvalResult {
    let request = EvalRequest::new(
        fixtures().join("tasks").join(task),
        kernel,
        device(),
        settings(static_checks),
    );
    evaluator
        .evaluate(request, CancellationToken::new(), None)
        .await
        .unwrap()
}

/// With the static filter on, the same kernel never runs.
async fn refused_statically(evaluator: &Evaluator, task: &str, kernel: &Path) {
    let result = evaluate(evaluator, task, kernel, true).await;
    assert_eq!(
        result.category,
        Some(Category::StaticCheck),
        "{}",
        result.summary
    );
}

fn sandboxed(result: &EvalResult) {
    let sandbox = result
        .sandbox
        .clone()
        .expect("the result names its sandbox");
    assert!(sandbox.enforced, "no sandbox here: {}", sandbox.reason);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_symlinks_never_lead_the_judge_to_a_host_file() {
    let probe = tempfile::tempdir().unwrap();
    let target = probe.path().join("precious.txt");
    std::fs::write(&target, "untouched\n").unwrap();
    let kernel = kernel_from(
        "hack_symlink_buffers.py",
        probe.path(),
        &[("@TARGET@", target.to_str().unwrap())],
    );
    let evaluator = evaluator();
    // The task has parameters: the judge lends the reference's weight and bias after the
    // kernel was imported, which is when the old file transport wrote through the links.
    let result = evaluate(&evaluator, "linear_relu.py", &kernel, false).await;
    sandboxed(&result);
    assert!(
        result.log.contains("planted"),
        "the attack ran: {}",
        result.log
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "untouched\n");
    assert!(
        result.correct,
        "the kernel itself is correct: {} {}",
        result.summary, result.log
    );
    refused_statically(&evaluator, "linear_relu.py", &kernel).await;
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_cannot_get_a_host_file_into_its_log() {
    let probe = tempfile::tempdir().unwrap();
    let secret = probe.path().join("private-notes.txt");
    let marker = "HOST-FILE-CONTENT-5d1e07";
    std::fs::write(&secret, format!("{marker}\n")).unwrap();
    let kernel = kernel_from(
        "hack_log_symlink.py",
        probe.path(),
        &[("@SECRET_FILE@", secret.to_str().unwrap())],
    );
    let evaluator = evaluator();
    let result = evaluate(&evaluator, "relu.py", &kernel, false).await;
    sandboxed(&result);
    let json = serde_json::to_string(&result).unwrap();
    assert!(!json.contains(marker), "the host file reached the result");
    assert!(
        result.log.contains("could not replace") || result.log.contains("replaced"),
        "the attack ran and its own output is in the log: {}",
        result.log
    );
    assert!(!result.correct);
    refused_statically(&evaluator, "relu.py", &kernel).await;
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_kernel_writes_reaches_the_next_evaluation() {
    let probe = tempfile::tempdir().unwrap();
    let (plant, find) = plant_and_find(probe.path());
    // One evaluator, one server, one zygote: the second evaluation is the first one's
    // neighbour in every way the sandbox allows.
    let evaluator = evaluator();
    let planted = evaluate(&evaluator, "relu.py", &plant, false).await;
    sandboxed(&planted);
    assert_planted(&planted);
    let found = evaluate(&evaluator, "relu.py", &find, false).await;
    assert_found_nothing(&found);
    let cache_of = |log: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix("my triton cache: "))
            .map(str::to_string)
            .expect("the kernel printed its Triton cache")
    };
    assert_ne!(
        cache_of(&planted.log),
        cache_of(&found.log),
        "each evaluation has a Triton cache of its own"
    );
    for kernel in [&plant, &find] {
        refused_statically(&evaluator, "relu.py", kernel).await;
    }
    evaluator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_cannot_stop_or_kill_the_zygote() {
    let evaluator = evaluator();
    let hostile = fixtures().join("kernels/hack_signal_zygote.py");
    let signalled = evaluate(&evaluator, "relu.py", &hostile, false).await;
    sandboxed(&signalled);
    assert!(
        signalled.log.contains("signalled"),
        "the attack ran: {}",
        signalled.log
    );
    assert!(signalled.correct, "{} {}", signalled.summary, signalled.log);
    let next = evaluate(
        &evaluator,
        "relu.py",
        &fixtures().join("kernels/relu_ok.py"),
        false,
    )
    .await;
    assert!(next.correct, "{}", next.summary);
    assert!(
        !next.flags.iter().any(|f| f == "zygote_restarted"),
        "the zygote died: {:?}",
        next.notes
    );

    // The control: a zygote that really dies (killed from outside, as only the host can)
    // is noticed, said and replaced. Only this evaluator's: the other tests run beside it.
    let namespace = signalled
        .log
        .lines()
        .find_map(|l| l.strip_prefix("pid namespace "))
        .expect("the kernel printed its pid namespace")
        .to_string();
    assert_eq!(kill_zygote_in(&namespace), 1, "one zygote in {namespace}");
    let after = evaluate(
        &evaluator,
        "relu.py",
        &fixtures().join("kernels/relu_ok.py"),
        false,
    )
    .await;
    assert!(after.correct, "{}", after.summary);
    assert!(
        after.flags.iter().any(|f| f == "zygote_restarted"),
        "{:?} {:?}",
        after.flags,
        after.notes
    );
    refused_statically(&evaluator, "relu.py", &hostile).await;
    evaluator.shutdown().await;
}

/// SIGKILLs the zygote of the sandbox whose pid namespace is `namespace` (`pid:[inode]`, as
/// a process in there reads `/proc/self/ns/pid`); returns how many processes it killed.
fn kill_zygote_in(namespace: &str) -> usize {
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let in_namespace = std::fs::read_link(entry.path().join("ns/pid"))
            .is_ok_and(|link| link.to_string_lossy() == namespace);
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if in_namespace && text.contains("kforge_harness zygote") {
            let status = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            if status.is_ok_and(|s| s.success()) {
                killed += 1;
            }
        }
    }
    killed
}
