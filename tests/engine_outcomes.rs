//! `kforge run` / `kforge resume` never call a failure a success (issue 10): a broken task
//! costs no LLM call, on run and on resume; a provider that is down the whole run ends
//! with exit code 3, its retries recorded as events. The real binary, the CPU evaluator
//! and a mock provider speaking the OpenAI wire format.

mod engine_common;
mod eval_common;
use eval_common::{kforge, kforge_output, text};

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use engine_common::*;
use kforge::protocol::{EngineState, Event, RunEnd};
use kforge::session::state::SessionState;
use kforge::session::store::SessionDir;

/// `kforge run TASK --cpu --headless` against `config`, off the async runtime.
async fn run(config: PathBuf, sessions: PathBuf, task: PathBuf, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec![
        "run".into(),
        task.display().to_string(),
        "--cpu".into(),
        "--headless".into(),
        "--sessions-dir".into(),
        sessions.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--provider".into(),
        "mock".into(),
        "--timeout".into(),
        "60".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    kforge_output(args).await
}

fn only_session(sessions: &Path) -> SessionDir {
    let dir = std::fs::read_dir(sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    SessionDir::open(&dir).unwrap()
}

fn ok_script() -> Script {
    Arc::new(|step, _user, _nth| match step {
        Step::Analysis => analysis_json("yes"),
        _ => fenced(&relu_ok("ok")),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_task_is_refused_before_any_llm_call() {
    let mock = MockLlm::start(ok_script(), Duration::ZERO).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = mock.config(tmp.path());
    for (task, says) in [
        ("bad_syntax.py", "task"),
        ("bad_inputs_raise.py", "cannot build the inputs"),
        ("bad_os_exit.py", "task"),
        ("huge_inputs.py", "does not fit"),
    ] {
        let sessions = tmp.path().join(task);
        let out = run(
            config.clone(),
            sessions.clone(),
            fixtures().join("tasks").join(task),
            &[],
        )
        .await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{task}: {stderr}");
        assert!(
            stderr.contains("refused") && stderr.contains(says),
            "{task}: {stderr}"
        );
        assert!(
            stderr.contains("no session was started and no LLM call was made"),
            "{task}: {stderr}"
        );
        assert!(!sessions.exists(), "{task}: no session");
    }
    assert_eq!(mock.total(), 0, "no LLM call for a broken task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_checks_the_task_before_any_llm_call() {
    let mock = MockLlm::start(ok_script(), Duration::ZERO).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = mock.config(tmp.path());
    let sessions = tmp.path().join("s");
    // Each mock answer reports 1200 tokens: the budget stops the run after the seeds.
    let out = run(
        config.clone(),
        sessions.clone(),
        fixtures().join("tasks/relu.py"),
        &["--max-tokens", "2000"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let asked = mock.total();
    let session = only_session(&sessions);
    std::fs::write(
        session.file("task.py"),
        std::fs::read(fixtures().join("tasks/bad_syntax.py")).unwrap(),
    )
    .unwrap();
    let path = session.path.display().to_string();
    let config = config.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        kforge(&["resume", &path, "--headless", "--config", &config])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("task relu refused"), "{stderr}");
    assert!(stderr.contains("no LLM call was made"), "{stderr}");
    assert_eq!(mock.total(), asked, "no LLM call on a refused resume");
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    assert_eq!(state.resumes, 0, "nothing was appended to the session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_down_for_the_whole_run_exits_3_with_its_retries_recorded() {
    let mock = MockLlm::start(Arc::new(|_, _, _| "HTTP:503".to_string()), Duration::ZERO).await;
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("kforge.toml");
    std::fs::write(
        &config,
        format!(
            "[llm]\ndefault = \"mock\"\n\n[llm.providers.mock]\npreset = \"vllm\"\nbase_url = \"{}\"\nmodel = \"mock-1\"\nmax_retries = 1\n\n[pipeline]\nseeds = 1\ncall_reasks = 1\nreask_delay_s = 0.2\n",
            mock.base_url
        ),
    )
    .unwrap();
    let sessions = tmp.path().join("s");
    let out = run(
        config,
        sessions.clone(),
        fixtures().join("tasks/relu.py"),
        &[],
    )
    .await;
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stderr.contains("every LLM call failed"), "{stderr}");
    // One call, one retry by the client; asked again once by the pipeline, one retry.
    assert_eq!(mock.total(), 4);
    assert!(stdout.contains("retrying in"), "{stdout}");
    assert!(stdout.contains("asking again"), "{stdout}");
    let session = only_session(&sessions);
    let records = session.read_events().unwrap().records;
    let retries: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.event {
            Event::LlmRetry { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(retries.len(), 2, "{retries:?}");
    assert!(retries.iter().all(|r| r.contains("503")), "{retries:?}");
    let state = SessionState::from_records(&records);
    assert_eq!(state.end, Some(RunEnd::NoAnswer));
    assert_eq!(state.state, EngineState::Failed, "resumable");
    assert!(stderr.contains("kforge resume"), "{stderr}");
}
