//! `kforge run` end to end on the CPU evaluator against a scripted mock LLM: the event
//! sequence, the tree, the files, the summary; repair, analysis, `worth_optimizing = no`,
//! a persistent kernel skipping the stages, malformed answers, kill -9 and resume, and
//! gates in step mode answered through the control file.

mod engine_common;
mod eval_common;
use eval_common::{kforge, kforge_output, text};

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine_common::*;
use kforge::protocol::{
    CandidateKind, Command as EngineCommand, Decision, EngineState, Event, GateKind,
};
use kforge::session::state::{CandidateStatus, SessionState};
use kforge::session::store::SessionDir;

struct Run {
    sessions: tempfile::TempDir,
    config: PathBuf,
}

impl Run {
    fn new(mock: &MockLlm) -> Run {
        let sessions = tempfile::tempdir().unwrap();
        let config = mock.config(sessions.path());
        Run { sessions, config }
    }

    fn args<'a>(&'a self, task: &'a str, extra: &[&'a str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "run".into(),
            fixtures().join("tasks").join(task).display().to_string(),
            "--cpu".into(),
            "--headless".into(),
            "--sessions-dir".into(),
            self.sessions.path().join("s").display().to_string(),
            "--config".into(),
            self.config.display().to_string(),
            "--provider".into(),
            "mock".into(),
            "--timeout".into(),
            "60".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    fn run(&self, task: &str, extra: &[&str]) -> Output {
        let args = self.args(task, extra);
        kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .output()
            .unwrap()
    }

    fn spawn(&self, task: &str, extra: &[&str]) -> Child {
        let args = self.args(task, extra);
        kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn session(&self) -> SessionDir {
        let dir = std::fs::read_dir(self.sessions.path().join("s"))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        SessionDir::open(&dir).unwrap()
    }
}

/// Runs `kforge run TASK ARGS...` to its end off the async runtime (the mock LLM serves
/// on it meanwhile).
async fn run_to_end(run: Run, task: &'static str, extra: &'static [&'static str]) -> (Run, Output) {
    tokio::task::spawn_blocking(move || {
        let out = run.run(task, extra);
        (run, out)
    })
    .await
    .unwrap()
}

/// `kforge resume SESSION --headless --config CONFIG EXTRA...` of a run's session, to its
/// end, off the async runtime (the mock LLM serves on it meanwhile).
async fn resume_to_end(run: &Run, extra: &[&str]) -> Output {
    let mut args: Vec<String> = vec![
        "resume".into(),
        run.session().path.display().to_string(),
        "--headless".into(),
        "--config".into(),
        run.config.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    kforge_output(args).await
}

fn state_of(session: &SessionDir) -> SessionState {
    SessionState::from_records(&session.read_events().unwrap().records)
}

/// The happy script: seeds (one broken), a repair, analyses saying yes, optimized
/// kernels, a kernel per stage.
fn standard_script() -> Script {
    Arc::new(|step, _user, nth| match step {
        Step::Seed if nth == 1 => fenced(&relu_broken()),
        Step::Seed => fenced(&relu_ok(&format!("seed answer {nth}"))),
        Step::Repair => fenced(&relu_ok("repaired")),
        Step::Analysis => analysis_json("yes"),
        Step::Optimize => fenced(&relu_ok(&format!("optimized {nth}"))),
        Step::Stage(name) => fenced(&relu_ok(&format!("stage kernel {name}"))),
    })
}

/// A shape of the tree that does not depend on which seed finished first.
fn tree_shape(state: &SessionState) -> BTreeMap<String, usize> {
    let mut shape = BTreeMap::new();
    for c in state.candidates.values() {
        let parent = c
            .parent
            .map(|p| state.candidates[&p].kind.word())
            .unwrap_or("root");
        let status = match c.status {
            CandidateStatus::Correct => "correct",
            CandidateStatus::Failed => "failed",
            _ => "other",
        };
        *shape
            .entry(format!("{} <- {parent} ({status})", c.kind.word()))
            .or_insert(0) += 1;
    }
    shape
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_pipeline_on_cpu() {
    let mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(run, "relu.py", &[]).await;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );

    // The console is tagged by step.
    assert!(stdout.contains("] repair 1/4: "), "{stdout}");
    assert!(stdout.contains("[analysis] candidate"), "{stdout}");
    assert!(
        stdout.contains("[stage 1/3] grid_and_parallel: correct, not compared: no timing to compare with (the base stays)"),
        "{stdout}"
    );
    assert!(stdout.contains("[stage 3/3] memory_and_tuning"), "{stdout}");

    // Requests: 2 seeds, 1 repair, 2 analyses, 2 optimizations, 3 stages.
    assert_eq!(mock.count(Step::Seed), 2);
    assert_eq!(mock.count(Step::Repair), 1);
    assert_eq!(mock.count(Step::Analysis), 2);
    assert_eq!(mock.count(Step::Optimize), 2);
    assert_eq!(mock.total(), 10);

    let session = run.session();
    let state = state_of(&session);
    assert_eq!(state.state, EngineState::Finished);
    let shape = tree_shape(&state);
    let expected: BTreeMap<String, usize> = [
        ("seed <- root (failed)", 1),
        ("seed <- root (correct)", 1),
        ("repair <- seed (correct)", 1),
        ("algorithm <- seed (correct)", 1),
        ("algorithm <- repair (correct)", 1),
        // The stages start from the best, the earliest correct kernel here, and none
        // replaces its base: nothing is timed to compare.
        ("stage <- seed (correct)", 3),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(shape, expected);
    // Without timing nothing is compared: no stage replaces its base, and the earliest
    // correct kernel stays the best (not the last stage, whatever its code).
    let best = state.best.unwrap();
    let first_correct = state.candidates.values().find(|c| c.is_correct()).unwrap();
    assert_eq!(best, first_correct.id);
    assert!(!matches!(
        &state.candidates[&best].kind,
        CandidateKind::Stage { .. }
    ));
    assert_eq!(state.stages.len(), 3);
    assert!(state.stages.iter().all(|s| !s.accepted));

    // Event sequence: starts, runs, ends; every call finished; sequence numbers dense.
    let records = session.read_events().unwrap().records;
    assert!(matches!(records[0].event, Event::SessionStarted { .. }));
    assert!(records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    assert!(matches!(
        records.last().unwrap().event,
        Event::StateChanged {
            state: EngineState::Finished
        }
    ));
    assert!(state.calls.values().all(|c| c.ok == Some(true)));
    assert!(!records.iter().any(|r| r.event.is_transient()));

    // Files.
    for file in [
        "session.json",
        "task.py",
        "best_kernel.py",
        "summary.json",
        "usage.csv",
        "report.md",
        "console.log",
    ] {
        assert!(session.file(file).is_file(), "{file} missing");
    }
    for c in state.candidates.values() {
        assert!(session.file(&c.file).is_file());
        assert!(session.file(c.eval_file.as_ref().unwrap()).is_file());
    }
    for call in state.calls.values() {
        assert!(session.file(&call.prompt_file).is_file());
        assert!(session.file(call.response_file.as_ref().unwrap()).is_file());
    }
    let best_code = session.read_file("best_kernel.py").unwrap();
    assert_eq!(best_code, session.read_file(&first_correct.file).unwrap());
    let summary: serde_json::Value =
        serde_json::from_str(&session.read_file("summary.json").unwrap()).unwrap();
    assert_eq!(summary["best"]["id"], best.0);
    let usage = session.read_file("usage.csv").unwrap();
    assert_eq!(
        usage.lines().count(),
        11,
        "a header and one row per call:\n{usage}"
    );
    let description = session.read_file("session.json").unwrap();
    assert!(!description.to_lowercase().contains("api_key"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_worth_optimizing_skips_the_optimization() {
    let script: Script = Arc::new(|step, _u, _n| match step {
        Step::Analysis => analysis_json("no"),
        Step::Stage(name) => fenced(&relu_ok(name)),
        _ => fenced(&relu_ok("seed")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(
        run,
        "relu.py",
        &["--seeds", "1", "--stages", "block_tiling"],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("not worth optimizing: memory bound"),
        "{stdout}"
    );
    assert_eq!(mock.count(Step::Optimize), 0);
    assert_eq!(mock.count(Step::Stage("block_tiling")), 1);
    let state = state_of(&run.session());
    assert!(
        state
            .candidates
            .values()
            .all(|c| !matches!(c.kind, CandidateKind::Algorithm))
    );
    let analysis = state
        .candidates
        .values()
        .find_map(|c| c.analysis.clone())
        .unwrap();
    assert_eq!(analysis.worth_optimizing, Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_kernel_skips_the_stages() {
    let rnn = fixture_kernel("rnn_hidden_ok.py");
    let script: Script = Arc::new(move |step, _u, _n| match step {
        Step::Analysis => analysis_json("no"),
        _ => fenced(&rnn),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(run, "rnn_hidden.py", &["--seeds", "1"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("is a persistent kernel"), "{stdout}");
    for stage in ["grid_and_parallel", "block_tiling", "memory_and_tuning"] {
        assert_eq!(mock.count(Step::Stage(stage)), 0);
    }
    let state = state_of(&run.session());
    let (persistent, reasons) = state
        .candidates
        .values()
        .find_map(|c| c.persistent.clone())
        .unwrap();
    assert!(persistent);
    assert!(!reasons.is_empty());
    assert!(state.stages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_answers_are_handled_and_logged() {
    let matmul = fixture_kernel("matmul_ok.py");
    let script: Script = Arc::new(move |step, _u, nth| match step {
        Step::Seed if nth == 1 => "I am sorry, I cannot write that kernel.".to_string(),
        // An answer for another task: a matmul kernel for the ReLU task.
        Step::Seed => fenced(&format!("# MOCK-BROKEN\n{matmul}")),
        Step::Repair => fenced(&relu_ok("repaired")),
        Step::Analysis => "Analysis: it is fine. {worth_optimizing: maybe".to_string(),
        // Cut off mid-answer: the stream ends without [DONE] and the fence is not closed.
        Step::Stage(_) => format!("TRUNCATE:Here:\n```python\n{}", relu_ok("truncated stage")),
        Step::Optimize => fenced(&relu_ok("opt")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(run, "relu.py", &["--stages", "block_tiling"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let console = run.session().read_file("console.log").unwrap();
    // An answer without code is asked again once, in the same conversation, with the
    // extraction error; so is an analysis without JSON.
    assert!(
        console.contains("contains no code") && console.contains("asking again once"),
        "{console}"
    );
    assert_eq!(mock.count(Step::Seed), 3, "two seeds and one follow-up");
    assert!(
        mock.prompts()
            .iter()
            .any(|p| p.contains("could not be used") && p.contains("no code")),
        "the follow-up carries the extraction error"
    );
    assert!(
        console.contains("no JSON object") && console.contains("also when asked again"),
        "{console}"
    );
    assert!(
        console.contains("truncated") || console.contains("cut off"),
        "{console}"
    );
    let state = state_of(&run.session());
    // The other task's kernel failed and was repaired; the truncated stage kernel still ran.
    assert!(
        state
            .candidates
            .values()
            .any(|c| matches!(c.kind, CandidateKind::Repair { .. }) && c.is_correct())
    );
    assert!(
        state
            .candidates
            .values()
            .any(|c| matches!(c.kind, CandidateKind::Stage { .. }) && c.is_correct())
    );
    assert_eq!(
        mock.count(Step::Optimize),
        0,
        "no usable analysis, no optimization"
    );
}

/// Waits until `pred` holds for the session's state (or panics after `limit`).
fn wait_for(
    run: &Run,
    limit: Duration,
    what: &str,
    pred: impl Fn(&SessionState) -> bool,
) -> SessionState {
    let start = Instant::now();
    loop {
        if let Some(dir) = std::fs::read_dir(run.sessions.path().join("s"))
            .ok()
            .and_then(|mut d| d.next())
            && let Ok(session) = SessionDir::open(&dir.unwrap().path())
        {
            let state = state_of(&session);
            if pred(&state) {
                return state;
            }
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_resume_reaches_the_same_tree_without_resending_answered_calls() {
    // The reference tree, uninterrupted.
    let reference_mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let reference = Run::new(&reference_mock);
    let (reference, out) = run_to_end(reference, "relu.py", &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let expected = tree_shape(&state_of(&reference.session()));

    type Point = (&'static str, fn(&SessionState) -> bool);
    let points: [Point; 3] = [
        ("after the first evaluation", |s| {
            s.candidates.values().any(|c| c.eval.is_some())
        }),
        ("after the first analysis", |s| {
            s.candidates.values().any(|c| c.analysis.is_some())
        }),
        ("during the stages", |s| {
            s.calls
                .values()
                .any(|c| c.kind == kforge::protocol::CallKind::Stage)
        }),
    ];
    for (what, point) in points {
        let mock = MockLlm::start(standard_script(), Duration::from_millis(300)).await;
        let run = Run::new(&mock);
        let (run, killed_at) = tokio::task::spawn_blocking(move || {
            let mut child = run.spawn("relu.py", &[]);
            let state = wait_for(&run, Duration::from_secs(120), what, point);
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            let _ = state;
            let killed_at = state_of(&run.session());
            (run, killed_at)
        })
        .await
        .unwrap();
        assert_ne!(
            killed_at.state,
            EngineState::Finished,
            "killed {what}, before the end"
        );
        let answered = killed_at
            .calls
            .values()
            .filter(|c| c.ok == Some(true))
            .count();
        let out = resume_to_end(&run, &[]).await;
        assert_eq!(
            out.status.code(),
            Some(0),
            "resume {what}: {}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        let state = state_of(&run.session());
        assert_eq!(state.state, EngineState::Finished, "{what}");
        assert_eq!(tree_shape(&state), expected, "{what}");
        // Every answered call was sent once: the mock saw the calls of a full run plus at
        // most those that were in flight (unanswered) when the process died; a call whose
        // start was recorded may not have reached the server before the kill.
        let in_flight = killed_at.calls.values().filter(|c| c.ok.is_none()).count();
        let total = mock.total();
        assert!(
            total >= reference_mock.total() && total <= reference_mock.total() + in_flight,
            "{what}: answered {answered}, {total} requests, a full run {}, {in_flight} in flight",
            reference_mock.total()
        );
        assert_eq!(state.resumes, 1);
        let log = text(&out.stdout);
        if answered > 0 {
            assert!(
                log.contains("reusing the saved answer") || log.contains("reusing candidate"),
                "{what}: {log}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_mode_gates_answered_through_the_control_file() {
    let mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, code) = tokio::task::spawn_blocking(move || {
        let mut child = run.spawn(
            "relu.py",
            &["--mode", "step", "--seeds", "1", "--stages", ""],
        );
        let start = Instant::now();
        let mut answered = std::collections::HashSet::new();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "step-mode run did not finish"
            );
            std::thread::sleep(Duration::from_millis(100));
            let Ok(dir) = std::fs::read_dir(run.sessions.path().join("s")) else {
                continue;
            };
            let Some(Ok(entry)) = dir.into_iter().next() else {
                continue;
            };
            let Ok(session) = SessionDir::open(&entry.path()) else {
                continue;
            };
            let state = state_of(&session);
            let Some(gate) = state.open_gate().cloned() else {
                continue;
            };
            if !answered.insert(gate.id) {
                continue;
            }
            let decision = match gate.kind {
                // The first prompt is rewritten by the person.
                GateKind::LlmCall if gate.id.0 == 1 => Decision::Rewrite {
                    text: "REWRITTEN PROMPT: write a ReLU".into(),
                },
                // The seed kernel is edited before it is evaluated.
                GateKind::Evaluation
                    if !answered
                        .iter()
                        .any(|g| *g < gate.id && state.gates[g].kind == GateKind::Evaluation) =>
                {
                    Decision::Rewrite {
                        text: relu_ok("edited by the person"),
                    }
                }
                // No algorithm optimization.
                GateKind::AlgorithmOptimization => Decision::Reject,
                _ => Decision::Approve,
            };
            session
                .send_command(&EngineCommand::Resolve {
                    gate: gate.id,
                    decision,
                })
                .unwrap();
        };
        (run, status.code())
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0));
    let prompts = mock.prompts();
    assert_eq!(
        prompts[0], "REWRITTEN PROMPT: write a ReLU",
        "the rewritten prompt was sent"
    );
    assert_eq!(mock.count(Step::Analysis), 0, "rejected: no analysis");
    let session = run.session();
    let state = state_of(&session);
    let seed = state
        .candidates
        .values()
        .find(|c| matches!(c.kind, CandidateKind::Seed { .. }))
        .unwrap();
    assert!(
        session
            .read_file(&seed.file)
            .unwrap()
            .contains("edited by the person")
    );
    assert!(seed.is_correct());
    let kinds: Vec<GateKind> = state.gates.values().map(|g| g.kind).collect();
    assert!(kinds.contains(&GateKind::LlmCall) && kinds.contains(&GateKind::Evaluation));
    assert!(
        kinds.contains(&GateKind::AlgorithmOptimization) && kinds.contains(&GateKind::FinalBest)
    );
    assert!(state.gates.values().all(|g| g.decision.is_some()));
    assert_eq!(state.best, Some(seed.id));
}

#[test]
fn without_a_provider_run_checks_the_task_and_says_what_to_configure() {
    let dir = tempfile::tempdir().unwrap();
    let out = kforge(&[
        "run",
        fixtures().join("tasks/relu.py").to_str().unwrap(),
        "--cpu",
    ])
    .current_dir(dir.path())
    .env("KFORGE_CONFIG_DIR", dir.path())
    .env_remove("OPENAI_API_KEY")
    .env_remove("DEEPSEEK_API_KEY")
    .env_remove("ANTHROPIC_API_KEY")
    .env_remove("OPENROUTER_API_KEY")
    .output()
    .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("task relu OK on cpu"),
        "the evaluator ran: {stderr}"
    );
    assert!(
        stderr.contains("DEEPSEEK_API_KEY"),
        "names what to set: {stderr}"
    );
    assert!(stderr.contains("--provider manual"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_does_not_fit_is_refused_before_any_llm_call() {
    let mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(run, "huge_inputs.py", &[]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "task huge_inputs refused: the task does not fit: the evaluation needs about 24576.0 GiB of host memory (inputs 4096.0 GiB, outputs 4096.0 GiB"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("no session was started and no LLM call was made"),
        "{stderr}"
    );
    assert_eq!(mock.total(), 0, "refused before any LLM call");
    assert!(
        !run.sessions.path().join("s").exists()
            || std::fs::read_dir(run.sessions.path().join("s"))
                .unwrap()
                .next()
                .is_none(),
        "no session directory"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_budget_ends_the_run_cleanly_with_everything_saved() {
    let mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let run = Run::new(&mock);
    // Each mock answer reports 1200 tokens: the budget is gone after the two seeds.
    let (run, out) = run_to_end(run, "relu.py", &["--max-tokens", "2000"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a budget is not a failure: {stdout}"
    );
    assert!(stdout.contains("budget reached"), "{stdout}");
    assert_eq!(mock.total(), 2, "no call after the budget");
    let session = run.session();
    let state = state_of(&session);
    assert_eq!(state.state, EngineState::Stopped);
    assert!(
        state
            .budget_exhausted
            .as_deref()
            .unwrap()
            .contains("tokens")
    );
    for file in ["summary.json", "usage.csv", "report.md"] {
        assert!(session.file(file).is_file(), "{file}");
    }
    // `kforge report` rewrites the report from the events alone.
    std::fs::remove_file(session.file("report.md")).unwrap();
    let out = kforge(&["report", session.path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(session.read_file("report.md").unwrap().contains("relu"));
    // Resumed with a larger budget, the run goes on from where it stopped (no answered
    // call sent again) and finishes; the new budget is kept in session.json.
    let out = resume_to_end(&run, &["--max-tokens", "1000000"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("budgets now: tokens 1000000"));
    assert_eq!(state_of(&session).state, EngineState::Finished);
    assert_eq!(
        mock.total(),
        10,
        "the two seed answers were not asked again"
    );
    assert!(
        session
            .read_file("session.json")
            .unwrap()
            .contains("1000000")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_cleanly_and_the_session_resumes() {
    let mock = MockLlm::start(standard_script(), Duration::from_millis(500)).await;
    let run = Run::new(&mock);
    let (run, code) = tokio::task::spawn_blocking(move || {
        let mut child = run.spawn("relu.py", &["--seeds", "1", "--stages", "block_tiling"]);
        wait_for(
            &run,
            Duration::from_secs(120),
            "the first evaluation",
            |s| s.candidates.values().any(|c| c.eval.is_some()),
        );
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let code = child.wait().unwrap().code();
        (run, code)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(130));
    let session = run.session();
    let state = state_of(&session);
    assert_eq!(state.state, EngineState::Stopped);
    assert!(!session.is_live(), "the lock is released");
    let out = resume_to_end(&run, &[]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(state_of(&session).state, EngineState::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_provider_waits_for_answer_files() {
    let sessions = tempfile::tempdir().unwrap();
    let root = sessions.path().join("s");
    let task = fixtures().join("tasks/relu.py");
    let mut child = kforge(&[
        "run",
        task.to_str().unwrap(),
        "--cpu",
        "--headless",
        "--provider",
        "manual",
        "--seeds",
        "1",
        "--stages",
        "",
        "--sessions-dir",
        root.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let code = tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut answered = std::collections::HashSet::new();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "manual run did not finish"
            );
            std::thread::sleep(Duration::from_millis(100));
            let Some(Ok(entry)) = std::fs::read_dir(&root).ok().and_then(|mut d| d.next()) else {
                continue;
            };
            let Ok(session) = SessionDir::open(&entry.path()) else {
                continue;
            };
            let state = state_of(&session);
            for call in state.calls.values().filter(|c| c.ok.is_none()) {
                if !answered.insert(call.id) {
                    continue;
                }
                let prompt = session.read_file(&call.prompt_file).unwrap();
                let answer = if call.kind == kforge::protocol::CallKind::Analysis {
                    assert!(prompt.contains("worth_optimizing"));
                    analysis_json("no")
                } else {
                    fenced(&relu_ok("typed by the person"))
                };
                session
                    .write_file(&format!("llm/{}.answer.md", call.id), answer.as_bytes())
                    .unwrap();
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0));
    let dir = std::fs::read_dir(sessions.path().join("s"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let session = SessionDir::open(&dir).unwrap();
    let state = state_of(&session);
    assert_eq!(state.state, EngineState::Finished);
    let info = state.info.clone().unwrap();
    assert_eq!(
        (info.provider.as_str(), info.model.as_str()),
        ("manual", "you")
    );
    assert!(
        session
            .read_file("best_kernel.py")
            .unwrap()
            .contains("typed by the person")
    );
    assert_eq!(state.total_cost(), Some(0.0), "the person costs nothing");
    let console = session.read_file("console.log").unwrap();
    assert!(console.contains("is yours: read"), "{console}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incorrect_stage_kernel_never_replaces_its_base() {
    let wrong = fixture_kernel("relu_wrong.py");
    let script: Script = Arc::new(move |step, _u, _n| match step {
        Step::Analysis => analysis_json("no"),
        // The stage and its repair both answer a kernel that computes the wrong thing.
        Step::Stage(name) => fenced(&format!("# stage kernel {name}\n{wrong}")),
        _ => fenced(&relu_ok("seed")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, out) = run_to_end(
        run,
        "relu.py",
        &["--seeds", "1", "--stages", "block_tiling"],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("[stage 1/1] block_tiling: not correct: the base stays"),
        "{stdout}"
    );
    let state = state_of(&run.session());
    let seed = state
        .candidates
        .values()
        .find(|c| matches!(c.kind, CandidateKind::Seed { .. }))
        .unwrap();
    assert_eq!(state.best, Some(seed.id), "the base stays the best");
    assert_eq!(state.stages.len(), 1);
    assert!(!state.stages[0].accepted);
    assert!(
        run.session()
            .read_file("best_kernel.py")
            .unwrap()
            .contains("# seed")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persons_actions_during_a_run() {
    let script: Script = Arc::new(|step, user, _n| match step {
        Step::Analysis => analysis_json("no"),
        _ if user.contains("MOCK-INSTRUCTION") => fenced(&relu_ok("instructed kernel")),
        _ => fenced(&relu_ok("seed")),
    });
    let mock = MockLlm::start(script, Duration::ZERO).await;
    let run = Run::new(&mock);
    let (run, code) = tokio::task::spawn_blocking(move || {
        // Review mode: the run waits at the final gate while the person works.
        let mut child = run.spawn(
            "relu.py",
            &["--mode", "review", "--seeds", "1", "--stages", ""],
        );
        let state = wait_for(&run, Duration::from_secs(120), "the algorithm gate", |s| {
            s.open_gate().is_some()
        });
        let session = run.session();
        let gate = state.open_gate().unwrap().clone();
        assert_eq!(gate.kind, GateKind::AlgorithmOptimization);
        session
            .send_command(&EngineCommand::Resolve {
                gate: gate.id,
                decision: Decision::Reject,
            })
            .unwrap();
        let state = wait_for(&run, Duration::from_secs(120), "the final gate", |s| {
            s.open_gate().is_some_and(|g| g.kind == GateKind::FinalBest)
        });
        let seed = state.candidates.values().next().unwrap().id;
        session
            .send_command(&EngineCommand::Optimize {
                candidate: seed,
                instruction: "MOCK-INSTRUCTION use BLOCK=2048".into(),
            })
            .unwrap();
        session
            .send_command(&EngineCommand::Manual {
                parent: Some(seed),
                code: relu_ok("written by the person"),
            })
            .unwrap();
        session
            .send_command(&EngineCommand::Reevaluate { candidate: seed })
            .unwrap();
        let state = wait_for(
            &run,
            Duration::from_secs(120),
            "the instructed and manual candidates",
            |s| {
                s.candidates.values().filter(|c| c.eval.is_some()).count() == 3
                    && s.candidates
                        .values()
                        .all(|c| c.status != CandidateStatus::Evaluating)
            },
        );
        let manual = state
            .candidates
            .values()
            .find(|c| matches!(c.kind, CandidateKind::Manual))
            .unwrap()
            .id;
        session
            .send_command(&EngineCommand::MarkFinal { candidate: manual })
            .unwrap();
        wait_for(&run, Duration::from_secs(30), "the mark", |s| {
            s.best == Some(manual)
        });
        let gate = state.open_gate().unwrap().id;
        session
            .send_command(&EngineCommand::Resolve {
                gate,
                decision: Decision::Approve,
            })
            .unwrap();
        (run, child.wait().unwrap().code())
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0));
    let session = run.session();
    let state = state_of(&session);
    let instructed = state
        .candidates
        .values()
        .find(|c| matches!(c.kind, CandidateKind::Instructed { .. }))
        .unwrap();
    assert!(instructed.is_correct());
    assert!(
        mock.prompts()
            .iter()
            .any(|p| p.contains("MOCK-INSTRUCTION use BLOCK=2048")),
        "the instruction reached the prompt"
    );
    let manual = state
        .candidates
        .values()
        .find(|c| matches!(c.kind, CandidateKind::Manual))
        .unwrap();
    assert!(manual.is_correct());
    assert_eq!(state.best, Some(manual.id), "marked final");
    assert!(
        session
            .read_file("best_kernel.py")
            .unwrap()
            .contains("written by the person")
    );
    let log = session.read_file("console.log").unwrap();
    assert!(log.contains("re-evaluated"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_file_follows_a_run_without_secrets() {
    let mock = MockLlm::start(standard_script(), Duration::ZERO).await;
    let run = Run::new(&mock);
    let cache = tempfile::tempdir().unwrap();
    let cache_path = cache.path().to_path_buf();
    let (_run, out) = tokio::task::spawn_blocking(move || {
        let args = run.args("relu.py", &["--seeds", "1", "--stages", ""]);
        let out = kforge(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .env("KFORGE_CACHE_DIR", &cache_path)
            .env("OPENAI_API_KEY", "sk-kforge-run-secret")
            .output()
            .unwrap();
        (run, out)
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let log = std::fs::read_to_string(cache.path().join("logs/kforge.log")).unwrap();
    for needle in [
        "command=run",
        "configuration read",
        "session created",
        "provider=mock",
        "evaluator server started",
        "llm call started",
        "llm call answered",
        "evaluation finished",
        "evaluator server stopping",
    ] {
        assert!(log.contains(needle), "{needle} missing:\n{log}");
    }
    assert!(!log.contains("sk-kforge-run-secret"), "{log}");
}
