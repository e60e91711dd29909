//! The pipeline through fakes (`engine::fakes`): no Python, no HTTP, milliseconds per run.
//! Each test names the behaviour of docs/architecture.md, Pipeline or of issue 10 it pins down.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::fakes::{self, FakeEvaluator, FakeLlm, Reply};
use super::ports::LlmCall;
use super::runner::{Engine, RunOutcome};
use crate::config::pipeline::{Accept, AnalyzeWhen, PipelineConfig};
use crate::eval::Device;
use crate::protocol::*;
use crate::session::state::{CandidateStatus, SessionState};
use crate::session::store::{EventWriter, SessionDir, Torn};

/// A fresh session directory under a temp dir that lives as long as the value.
pub(super) struct Dir {
    _tmp: tempfile::TempDir,
    pub(super) session: SessionDir,
}

pub(super) fn dir() -> Dir {
    let tmp = tempfile::tempdir().unwrap();
    let session = SessionDir::create(tmp.path(), "relu", "fake", "fake-1").unwrap();
    Dir { _tmp: tmp, session }
}

/// The default pipeline, asked to run every call on the CPU too (most tests here pin down
/// the whole flow on the fakes' CPU device; `the_cpu_skips_the_calls_that_only_chase_speed`
/// pins down the default).
pub(super) fn pipeline() -> PipelineConfig {
    PipelineConfig {
        reask_delay_s: 0.0,
        speed_calls_on_cpu: true,
        ..PipelineConfig::default()
    }
}

/// What the person does while the run goes on: answers gates, sends commands.
type Person = Box<dyn FnMut(&Event) -> Vec<Command> + Send>;

fn approve_all() -> Person {
    Box::new(fakes::approve_every_gate)
}

/// Runs an engine over the fakes to its end; `person` answers what it shows.
/// An engine on the session with the fake ports, a fresh start.
fn engine_on(
    session: &SessionDir,
    eval: &Arc<FakeEvaluator>,
    llm: &Arc<FakeLlm>,
    pipeline: PipelineConfig,
) -> Engine {
    engine_resuming(
        session,
        SessionState::default(),
        eval,
        llm,
        pipeline,
        Device::Cpu,
    )
}

/// An engine on the session with the fake ports, continuing `prior`.
fn engine_resuming(
    session: &SessionDir,
    prior: SessionState,
    eval: &Arc<FakeEvaluator>,
    llm: &Arc<FakeLlm>,
    pipeline: PipelineConfig,
    device: Device,
) -> Engine {
    let setup = fakes::setup(
        session.clone(),
        prior,
        eval.clone(),
        llm.clone(),
        pipeline,
        device,
    );
    Engine::new(setup).unwrap()
}

async fn run_with(
    session: &SessionDir,
    prior: SessionState,
    eval: &Arc<FakeEvaluator>,
    llm: &Arc<FakeLlm>,
    pipeline: PipelineConfig,
    device: Device,
    person: Person,
) -> (RunOutcome, SessionState) {
    let engine = Arc::new(engine_resuming(session, prior, eval, llm, pipeline, device));
    let steering = fakes::steer(&engine, person);
    let outcome = engine.run().await;
    engine.stop_actions();
    steering.abort();
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    (outcome, state)
}

async fn run(
    session: &SessionDir,
    eval: &Arc<FakeEvaluator>,
    llm: &Arc<FakeLlm>,
    pipeline: PipelineConfig,
    device: Device,
) -> (RunOutcome, SessionState) {
    run_with(
        session,
        SessionState::default(),
        eval,
        llm,
        pipeline,
        device,
        approve_all(),
    )
    .await
}

/// Seed 1 fails to compile and is repaired; seed 2 is correct; analyses say yes; every
/// optimization and stage answer is a correct kernel.
pub(super) fn standard(call: &LlmCall) -> Reply {
    Reply::Text(match call.kind {
        CallKind::Seed if call.key == "seed1" => fakes::kernel("FAKE-FAIL:compile seed 1"),
        CallKind::Seed => fakes::kernel("seed 2"),
        CallKind::Repair => fakes::kernel("repaired"),
        CallKind::Analysis => fakes::analysis(true),
        CallKind::Optimize => fakes::kernel("optimized"),
        CallKind::Stage => fakes::kernel(&format!("stage {}", call.key)),
        CallKind::Instructed => fakes::kernel("instructed"),
    })
}

/// `kind <- parent kind (status)` counts: the tree without its ids.
fn shape(state: &SessionState) -> BTreeMap<String, usize> {
    let mut shape = BTreeMap::new();
    for c in state.candidates.values() {
        let parent = c
            .parent
            .map(|p| state.candidates[&p].kind.word())
            .unwrap_or("root");
        *shape
            .entry(format!("{} <- {parent} ({:?})", c.kind.word(), c.status))
            .or_insert(0) += 1;
    }
    shape
}

fn keys(llm: &FakeLlm) -> Vec<String> {
    let mut keys: Vec<String> = llm.calls().iter().map(|c| c.key.clone()).collect();
    keys.sort();
    keys
}

/// Every event that names a file was written after its file: the files are all there.
fn assert_files_behind_events(session: &SessionDir) {
    for record in session.read_events().unwrap().records {
        let file = match &record.event {
            Event::CandidateCreated { file, .. } => file.clone(),
            Event::EvalFinished { result_file, .. } => result_file.clone(),
            Event::LlmCallStarted { prompt_file, .. } => prompt_file.clone(),
            Event::LlmCallFinished {
                response_file: Some(f),
                ..
            } => f.clone(),
            _ => continue,
        };
        assert!(
            session.file(&file).is_file(),
            "event {} names {file}, which is missing",
            record.seq
        );
    }
}

/// Issue 38: the torch.compile baseline the task check left out is measured as the run
/// starts, by a task check of its own queued before the first candidate's evaluation, and
/// the console says so, and says when it gave no figure.
#[tokio::test]
async fn the_compile_baseline_left_out_of_the_task_check_is_measured_as_the_run_starts() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let mut setup = fakes::setup(
        d.session.clone(),
        SessionState::default(),
        eval.clone(),
        llm.clone(),
        pipeline(),
        Device::Cuda(0),
    );
    setup.warmup = super::warmup_plan::BaselineWarmup::Compile {
        device: Device::Cuda(0),
    };
    let engine = Arc::new(Engine::new(setup).unwrap());
    let steering = fakes::steer(&engine, approve_all());
    let outcome = engine.run().await;
    engine.stop_actions();
    steering.abort();
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let requests = eval.requests();
    let first = &requests[0];
    assert!(
        first.reference_only && first.settings.compile_baseline,
        "{first:?}"
    );
    assert_eq!(first.task, d.session.file("task.py"));
    assert_eq!(
        requests.iter().filter(|r| r.reference_only).count(),
        1,
        "one warm-up"
    );
    let logs: Vec<String> = d
        .session
        .read_events()
        .unwrap()
        .records
        .into_iter()
        .filter_map(|r| match r.event {
            Event::Log { tag, message, .. } if tag == "baseline" => Some(message),
            _ => None,
        })
        .collect();
    assert!(
        logs[0].contains("timing the reference under torch.compile on cuda:0"),
        "{logs:?}"
    );
    // The fake's task check has no compile figures: said, and left to each evaluation.
    assert!(logs[1].contains("not measured ahead"), "{logs:?}");
    // Without a warm-up nothing of the kind is sent.
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let _ = run(&d.session, &eval, &llm, pipeline(), Device::Cuda(0)).await;
    assert!(eval.requests().iter().all(|r| !r.reference_only));
}

#[tokio::test]
async fn the_whole_pipeline_on_the_cpu() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run(&d.session, &eval, &llm, pipeline(), Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 0);
    assert_eq!(state.state, EngineState::Finished);
    let per_kind = |kind: CallKind| llm.calls().iter().filter(|c| c.kind == kind).count();
    assert_eq!(
        [
            CallKind::Seed,
            CallKind::Repair,
            CallKind::Analysis,
            CallKind::Optimize,
            CallKind::Stage
        ]
        .map(per_kind),
        [2, 1, 2, 2, 3]
    );
    // On the CPU nothing is timed: no stage is compared with its base (none replaces it),
    // and the earliest correct kernel stays the best.
    let first = state.candidates.values().find(|c| c.is_correct()).unwrap();
    let last = state.candidates.values().last().unwrap();
    assert!(matches!(last.kind, CandidateKind::Stage { index: 3, .. }));
    assert_eq!(state.best, Some(first.id));
    assert_eq!(outcome.best, Some(first.id));
    assert_eq!(state.stages.len(), 3);
    assert!(
        state.stages.iter().all(|s| !s.accepted
            && s.verdict == StageVerdict::NotCompared
            && s.reason.contains("not compared")),
        "{:?}",
        state.stages
    );
    assert_eq!(
        d.session.read_file("best_kernel.py").unwrap(),
        d.session.read_file(&first.file).unwrap()
    );
    assert_files_behind_events(&d.session);
    for file in ["report.md", "summary.json", "usage.csv"] {
        assert!(d.session.file(file).is_file(), "{file}");
    }
}

#[tokio::test]
async fn the_repair_loop_carries_each_attempts_own_failure_and_stops_at_its_limit() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        let n = call.key.matches("repair").count() + call.key.len();
        Reply::Text(fakes::kernel(&format!(
            "FAKE-FAIL:{} attempt {n}",
            if call.kind == CallKind::Seed {
                "compile"
            } else {
                "mismatch"
            }
        )))
    }));
    let config = PipelineConfig {
        seeds: 1,
        seed_repairs: 3,
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::NoCorrectKernel, "{}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 4);
    assert_eq!(state.state, EngineState::Finished);
    let calls = llm.calls();
    assert_eq!(
        calls.iter().map(|c| c.key.as_str()).collect::<Vec<_>>(),
        ["seed1", "seed1/repair1", "seed1/repair2", "seed1/repair3"]
    );
    // The first repair is about the compile error; the third also lists the two
    // earlier attempts' own failures (compile, then mismatch).
    let first = FakeLlm::prompt(&calls[1]);
    assert!(first.contains("compile"), "{first}");
    let third = FakeLlm::prompt(&calls[3]);
    assert!(
        third.contains("fake compile failure") && third.contains("fake mismatch failure"),
        "{third}"
    );
    assert_eq!(state.candidates.len(), 4);
    assert!(state.best.is_none());
    assert!(!d.session.file("best_kernel.py").exists());
}

#[tokio::test]
async fn skipping_a_repair_call_in_step_mode_ends_the_repair() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        Reply::Text(fakes::kernel(&format!("FAKE-FAIL:mismatch {}", call.key)))
    }));
    let config = PipelineConfig {
        mode: Mode::Step,
        seeds: 1,
        seed_repairs: 4,
        stages: vec![],
        ..pipeline()
    };
    // Every gate approved but the first repair call's.
    let person: Person = Box::new(|event| match event {
        Event::GateOpened {
            gate, kind, key, ..
        } => vec![Command::Resolve {
            gate: *gate,
            decision: if *kind == GateKind::LlmCall && key.contains("repair") {
                Decision::Reject
            } else {
                Decision::Approve
            },
        }],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config,
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::NoCorrectKernel, "{}", outcome.reason);
    let repair_gates = state
        .gates
        .values()
        .filter(|g| g.kind == GateKind::LlmCall && g.key.contains("repair"))
        .count();
    assert_eq!(
        repair_gates, 1,
        "one rejection ends the repair: {:?}",
        state.gates
    );
    assert!(
        llm.calls().iter().all(|c| !c.key.contains("repair")),
        "no repair call was sent"
    );
}

#[tokio::test]
async fn review_mode_asks_before_the_analysis_and_a_rejection_skips_it() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Review,
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    let person: Person = Box::new(|event| match event {
        Event::GateOpened { gate, kind, .. } => vec![Command::Resolve {
            gate: *gate,
            decision: if *kind == GateKind::AlgorithmOptimization {
                Decision::Reject
            } else {
                Decision::Approve
            },
        }],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config,
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert!(
        llm.calls().iter().all(|c| c.kind != CallKind::Analysis),
        "rejected: no analysis call"
    );
    let kinds: Vec<GateKind> = state.gates.values().map(|g| g.kind).collect();
    assert_eq!(
        kinds,
        [GateKind::AlgorithmOptimization, GateKind::FinalBest]
    );
    assert_eq!(
        state.gates.values().next().unwrap().decision,
        Some(Decision::Reject)
    );
}

#[tokio::test]
async fn not_worth_optimizing_skips_the_optimization() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| match call.kind {
        CallKind::Analysis => Reply::Text(fakes::analysis(false)),
        _ => standard(call),
    }));
    let config = PipelineConfig {
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Complete);
    assert!(llm.calls().iter().all(|c| c.kind != CallKind::Optimize));
    let analysed = state
        .candidates
        .values()
        .find(|c| c.analysis.is_some())
        .unwrap();
    assert_eq!(
        analysed.analysis.as_ref().unwrap().worth_optimizing,
        Some(false)
    );
}

const PERSISTENT: &str = r#"
import torch
import triton
import triton.language as tl

@triton.jit
def gru_seq_kernel(gi_ptr, h_ptr, seq_len, hidden, BLOCK_H: tl.constexpr):
    cols = tl.arange(0, BLOCK_H)
    h = tl.zeros((BLOCK_H,), dtype=tl.float32)
    for t in range(0, seq_len):
        gi = tl.load(gi_ptr + t * hidden + cols)
        h = 0.5 * h + gi
    tl.store(h_ptr + cols, h)

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
"#;

#[tokio::test]
async fn a_persistent_best_kernel_skips_the_stages() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| match call.kind {
        CallKind::Seed => Reply::Text(format!("```python\n# FAKE-SCORE:1.4\n{PERSISTENT}```")),
        CallKind::Analysis => Reply::Text(fakes::analysis(false)),
        _ => standard(call),
    }));
    let config = PipelineConfig {
        seeds: 1,
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cuda(0)).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert!(llm.calls().iter().all(|c| c.kind != CallKind::Stage));
    let seed = state.candidates.values().next().unwrap();
    let (persistent, reasons) = seed.persistent.clone().unwrap();
    assert!(persistent && !reasons.is_empty(), "{reasons:?}");
    assert!(state.stages.is_empty());
}

#[tokio::test]
async fn stage_regression_protection_keeps_the_faster_base() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        Reply::Text(match (call.kind, call.key.as_str()) {
            (CallKind::Seed, _) => fakes::kernel("FAKE-SCORE:1.5 seed"),
            (CallKind::Analysis, _) => fakes::analysis(false),
            (CallKind::Stage, "stage/grid_and_parallel") => fakes::kernel("FAKE-SCORE:1.2 slower"),
            (CallKind::Stage, "stage/block_tiling") => fakes::kernel("FAKE-SCORE:2.0 faster"),
            _ => fakes::kernel("FAKE-FAIL:mismatch wrong"),
        })
    }));
    let config = PipelineConfig {
        seeds: 1,
        accept: Accept::Improve,
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cuda(0)).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let verdicts: Vec<(&str, bool)> = state
        .stages
        .iter()
        .map(|s| (s.stage.as_str(), s.accepted))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("grid_and_parallel", false),
            ("block_tiling", true),
            ("memory_and_tuning", false)
        ]
    );
    // Stage 2 was built on the seed (stage 1 rejected), stage 3 on stage 2.
    let seed = state.candidates.values().next().unwrap().id;
    assert_eq!(state.stages[1].base, seed);
    assert_eq!(state.stages[2].base, state.stages[1].result.unwrap());
    // The memory stage failed and its one repair failed too.
    assert_eq!(
        llm.calls()
            .iter()
            .filter(|c| c.key == "stage/memory_and_tuning/repair1")
            .count(),
        1
    );
    let best = &state.candidates[&state.best.unwrap()];
    assert_eq!(best.score(), Some(2.0));
}

#[tokio::test]
async fn a_token_budget_stops_the_run_and_resume_finishes_it_without_asking_again() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    // Every fake answer reports 1200 tokens: the budget is gone after the two seeds.
    let config = PipelineConfig {
        max_tokens: Some(2000),
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::BudgetReached, "{}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 0);
    assert_eq!(state.state, EngineState::Stopped);
    assert_eq!(llm.calls().len(), 2, "no call after the budget");
    let answered: Vec<String> = keys(&llm);

    // Resume without the budget: the answered seeds are not asked again, and the run
    // reaches the tree of an uninterrupted one.
    let resumed = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run_with(
        &d.session,
        state,
        &eval,
        &resumed,
        pipeline(),
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert!(
        resumed.calls().iter().all(|c| !answered.contains(&c.key)),
        "answered calls were sent again: {:?}",
        keys(&resumed)
    );
    assert_eq!(state.resumes, 1);
    let fresh = dir();
    let (_, uninterrupted) = run(
        &fresh.session,
        &Arc::new(FakeEvaluator::default()),
        &Arc::new(FakeLlm::new(standard)),
        pipeline(),
        Device::Cpu,
    )
    .await;
    assert_eq!(shape(&state), shape(&uninterrupted));
    assert_files_behind_events(&d.session);
}

#[tokio::test]
async fn a_provider_down_for_the_whole_run_ends_with_no_answer_and_a_non_zero_code() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|_: &LlmCall| Reply::Retried {
        causes: vec!["HTTP 503: overloaded".into(), "HTTP 503: overloaded".into()],
        then: Box::new(Reply::Failed(
            "HTTP 503: overloaded (after 2 retries)".into(),
        )),
    }));
    let config = PipelineConfig {
        call_reasks: 2,
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::NoAnswer, "{}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 3);
    assert!(outcome.reason.contains("HTTP 503"), "{}", outcome.reason);
    assert_eq!(
        state.state,
        EngineState::Failed,
        "resumable once the provider is back"
    );
    // Each seed's call was asked 1 + 2 times, then its lineage gave up.
    assert_eq!(llm.calls().len(), 6);
    assert!(eval.evaluated().is_empty());
    // The client's retries are events with their causes, and console lines.
    let retries = d
        .session
        .read_events()
        .unwrap()
        .records
        .iter()
        .filter(|r| matches!(r.event, Event::LlmRetry { .. }))
        .count();
    assert_eq!(retries, 12);
    assert!(state.calls.values().all(|c| c.retries.len() == 2));
    assert!(
        state
            .log
            .iter()
            .any(|l| l.message.contains("retrying in") && l.message.contains("503"))
    );
    assert!(state.log.iter().any(|l| l.message.contains("asking again")));
}

#[tokio::test]
async fn the_provider_refusing_the_run_fails_it_at_once() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|_: &LlmCall| {
        Reply::Fatal("authentication failed (HTTP 401)".into())
    }));
    let config = PipelineConfig {
        seeds: 1,
        ..pipeline()
    };
    let (outcome, _) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Failed);
    assert_eq!(outcome.end.exit_code(), 1);
    assert!(outcome.reason.contains("401"), "{}", outcome.reason);
    assert_eq!(
        llm.calls().len(),
        1,
        "no call is asked again after a refusal"
    );
}

#[tokio::test]
async fn an_answer_without_code_is_asked_again_once_with_the_extraction_error() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        if call.request.messages.len() == 1 {
            Reply::Text("I would use a Triton kernel with BLOCK=1024.".into())
        } else {
            Reply::Text(fakes::kernel("second try"))
        }
    }));
    let config = PipelineConfig {
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let again = llm
        .calls()
        .into_iter()
        .find(|c| c.key == "seed1/again")
        .expect("a follow-up call");
    // The same conversation: the prompt, the unusable answer, then the error.
    let roles: Vec<_> = again.request.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            crate::llm::Role::User,
            crate::llm::Role::Assistant,
            crate::llm::Role::User
        ]
    );
    let followup = FakeLlm::prompt(&again);
    assert!(
        followup.contains("could not be used") && followup.contains("no code"),
        "{followup}"
    );
    let seed = state.candidates.values().next().unwrap();
    assert_eq!(seed.key, "seed1");
    assert!(
        d.session
            .read_file(&seed.file)
            .unwrap()
            .contains("second try")
    );
}

#[tokio::test]
async fn answers_that_never_have_code_end_with_nothing_evaluated() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|_: &LlmCall| {
        Reply::Text("Sorry, I cannot help with that.".into())
    }));
    let (outcome, state) = run(&d.session, &eval, &llm, pipeline(), Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::NothingEvaluated, "{}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 3);
    assert_eq!(
        llm.calls().len(),
        4,
        "each seed asked, then asked again once"
    );
    assert!(state.candidates.is_empty());
}

#[tokio::test]
async fn a_full_disk_stops_the_run_cleanly_and_resume_loses_no_candidate() {
    let eval = Arc::new(FakeEvaluator::default());
    let fresh = dir();
    let uninterrupted = standard_run(&fresh.session, &eval).await;
    let full_size: u64 = walk_size(&fresh.session.path);

    // The disk fills at several points of the run; each time the run stops cleanly with
    // a clear reason, every event that names a file has its file, and resume finishes
    // with the same tree.
    let mut failed_writes = std::collections::BTreeSet::new();
    let mut left_in_flight = 0;
    for fraction in (1..80).map(|i| i as f64 / 80.0) {
        let d = dir();
        let already = walk_size(&d.session.path);
        let limit = already + (full_size as f64 * fraction) as u64;
        let limited = d.session.clone().with_write_limit(limit);
        let (failed, in_flight) = full_disk_then_resume(
            &d.session,
            &limited,
            &eval,
            &uninterrupted,
            &format!("at {fraction}"),
        )
        .await;
        failed_writes.insert(failed);
        left_in_flight += in_flight;
    }
    // The disk filled at every kind of write, and some runs stopped mid-call.
    assert!(failed_writes.len() >= 4, "{failed_writes:?}");
    assert!(left_in_flight > 0);
}

/// The standard session run to its end without a fault: what a resumed run must end as.
async fn standard_run(session: &SessionDir, eval: &Arc<FakeEvaluator>) -> SessionState {
    let llm = Arc::new(FakeLlm::new(standard));
    run(session, eval, &llm, pipeline(), Device::Cpu).await.1
}

/// Runs the standard session on `limited` (a disk that fills), checks that it stopped
/// cleanly with its files behind its events, resumes it with space freed and checks that
/// the resumed run ends as `uninterrupted` did: no candidate lost or left unfinished, no
/// answered call sent again. Returns which write failed and how many calls were left in
/// flight.
async fn full_disk_then_resume(
    session: &SessionDir,
    limited: &SessionDir,
    eval: &Arc<FakeEvaluator>,
    uninterrupted: &SessionState,
    at: &str,
) -> (&'static str, usize) {
    let llm = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run(limited, eval, &llm, pipeline(), Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Failed, "{at}: {}", outcome.reason);
    assert_eq!(outcome.end.exit_code(), 1);
    assert!(
        outcome.reason.contains("No space left on device"),
        "{at}: {}",
        outcome.reason
    );
    let failed = [
        "events.jsonl",
        "console.log",
        "kernels/",
        "eval/",
        ".prompt.md",
        ".system.md",
        ".response.md",
    ]
    .into_iter()
    .find(|f| outcome.reason.contains(f))
    .unwrap_or("other");
    let in_flight = state.calls.values().filter(|c| c.ok.is_none()).count();
    assert_files_behind_events(session);
    let answered: Vec<String> = state
        .calls
        .values()
        .filter(|c| c.ok == Some(true))
        .map(|c| c.key.clone())
        .collect();

    // Space is freed; resume.
    let read = session.read_events().unwrap();
    let prior = SessionState::from_records(&read.records);
    let resumed = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run_with(
        session,
        prior,
        eval,
        &resumed,
        pipeline(),
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{at}: {}", outcome.reason);
    assert_eq!(shape(&state), shape(uninterrupted), "{at}");
    assert!(
        state.candidates.values().all(|c| matches!(
            c.status,
            CandidateStatus::Correct | CandidateStatus::Failed | CandidateStatus::Dropped
        )),
        "{at}: a candidate was left unfinished: {:?}",
        state
            .candidates
            .values()
            .map(|c| (c.id, c.status))
            .collect::<Vec<_>>()
    );
    assert!(
        resumed.calls().iter().all(|c| !answered.contains(&c.key)),
        "{at}: answered calls were sent again"
    );
    let read = session.read_events().unwrap();
    assert!(read.invalid.is_empty(), "{at}: {:?}", read.invalid);
    assert!(read.torn.is_none(), "{at}: {:?}", read.torn);
    assert!(
        state.calls.values().all(|c| c.ok.is_some()),
        "{at}: a call was left in flight"
    );
    (failed, in_flight)
}

/// The disk fills on every event line of a run in turn, just before its newline (a whole
/// event on a line that does not end: resume read it, and the writer once cut it off,
/// leaving a seed 'Evaluating' for good), and at its start or in its middle (every other
/// line each): the same checks as above, at points that do not move with the lengths of
/// timestamps, so the sweep fails or passes the same way under any load.
#[tokio::test]
async fn a_full_disk_on_any_event_line_and_resume_loses_no_candidate() {
    let eval = Arc::new(FakeEvaluator::default());
    let fresh = dir();
    let uninterrupted = standard_run(&fresh.session, &eval).await;
    let lines = fresh.session.read_events().unwrap().records.len() as u64;
    for line in 0..lines {
        let boundary = if line % 2 == 0 {
            Torn::Nothing
        } else {
            Torn::Bytes(40)
        };
        for keep in [Torn::AllButNewline, boundary] {
            let d = dir();
            let limited = d.session.clone().with_event_cut(line, keep);
            full_disk_then_resume(
                &d.session,
                &limited,
                &eval,
                &uninterrupted,
                &format!("at event line {} ({keep:?})", line + 1),
            )
            .await;
        }
    }
}

/// A run that stopped mid-evaluation leaves no candidate 'Evaluating' after resume: a
/// re-evaluation of a candidate that had a result falls back to that result (recorded,
/// not run again); a person's candidate that was never evaluated (the replay of the
/// pipeline does not come back to it) is evaluated by the resumed run.
#[tokio::test]
async fn resume_closes_the_evaluations_an_earlier_run_left_unfinished() {
    let eval = Arc::new(FakeEvaluator::default());
    let d = dir();
    let first = standard_run(&d.session, &eval).await;
    let best = first.best.unwrap();
    // The earlier run was re-evaluating its best and evaluating a manual kernel.
    let mut w = EventWriter::open(&d.session, first.last_seq).unwrap();
    w.append(Event::EvalStarted { candidate: best }).unwrap();
    let manual = CandidateId(first.candidates.keys().last().unwrap().0 + 1);
    let file = format!("kernels/{manual}-manual.py");
    let code = "# a manual kernel\n";
    d.session.write_file(&file, code.as_bytes()).unwrap();
    w.append(Event::CandidateCreated {
        id: manual,
        key: "user1-1".into(),
        parent: Some(best),
        kind: CandidateKind::Manual,
        file,
        call: None,
    })
    .unwrap();
    w.append(Event::EvalStarted { candidate: manual }).unwrap();
    drop(w);
    let prior = SessionState::from_records(&d.session.read_events().unwrap().records);
    assert_eq!(prior.evaluations_in_flight().count(), 2);
    let before = eval.evaluated().len();

    let llm = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run_with(
        &d.session,
        prior,
        &eval,
        &llm,
        pipeline(),
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert_eq!(state.evaluations_in_flight().count(), 0);
    assert_eq!(
        state.candidates[&best].status,
        first.candidates[&best].status
    );
    assert_eq!(state.candidates[&best].eval, first.candidates[&best].eval);
    assert_eq!(state.candidates[&manual].status, CandidateStatus::Correct);
    assert_eq!(eval.evaluated()[before..], [code.to_string()]);
    assert!(llm.calls().is_empty());
    let closed: Vec<CandidateId> = d
        .session
        .read_events()
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match r.event {
            Event::EvalInterrupted { candidate } => Some(candidate),
            _ => None,
        })
        .collect();
    assert_eq!(closed, [best, manual]);
}

fn walk_size(path: &std::path::Path) -> u64 {
    std::fs::read_dir(path)
        .unwrap()
        .flatten()
        .map(|e| {
            let m = e.metadata().unwrap();
            if m.is_dir() {
                walk_size(&e.path())
            } else {
                m.len()
            }
        })
        .sum()
}

#[tokio::test]
async fn a_candidate_marked_final_stays_final_through_better_kernels_and_resume() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        Reply::Text(match call.kind {
            CallKind::Seed => fakes::kernel("FAKE-SCORE:1.1 seed"),
            CallKind::Analysis => fakes::analysis(true),
            CallKind::Optimize => fakes::kernel("FAKE-SCORE:1.3 optimized"),
            _ => fakes::kernel("FAKE-SCORE:3.0 stage"),
        })
    }));
    let config = PipelineConfig {
        seeds: 1,
        mode: Mode::Review,
        ..pipeline()
    };
    // At the first gate (the seed's analysis) the person marks the seed final.
    let person: Person = Box::new(|event| match event {
        Event::GateOpened { gate, .. } => vec![
            Command::MarkFinal {
                candidate: CandidateId(1),
            },
            Command::Resolve {
                gate: *gate,
                decision: Decision::Approve,
            },
        ],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config.clone(),
        Device::Cuda(0),
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let seed = CandidateId(1);
    assert_eq!(state.final_marked, Some(seed));
    assert_eq!(state.best, Some(seed), "final beats the faster stages");
    assert_eq!(outcome.best, Some(seed));
    assert!(
        state
            .candidates
            .values()
            .any(|c| c.score() == Some(3.0) && c.is_correct())
    );
    assert!(
        d.session
            .read_file("best_kernel.py")
            .unwrap()
            .contains("FAKE-SCORE:1.1")
    );
    assert!(
        d.session
            .read_file("report.md")
            .unwrap()
            .contains("marked final")
    );
    // Re-read from disk, the mark is still there.
    let reread = SessionState::from_records(&d.session.read_events().unwrap().records);
    assert_eq!(reread.best, Some(seed));
    // No final-best gate: the person already chose.
    assert!(state.gates.values().all(|g| g.kind != GateKind::FinalBest));
}

/// Issue 23, item 2: the stages gate names its base. Marking another candidate final
/// while it waits withdraws it (recorded) and asks again about the marked one; an
/// approval sent to the old gate afterwards (a second window) is not taken. The stages
/// run on what was approved, and a resume after a stop anywhere in them sends the same
/// stage calls on the same bases as the uninterrupted run.
#[tokio::test]
async fn a_final_mark_while_the_stages_gate_waits_asks_again_and_resume_agrees() {
    let script = |call: &LlmCall| {
        Reply::Text(match call.kind {
            CallKind::Seed if call.key == "seed1" => fakes::kernel("FAKE-SCORE:1.5 seed one"),
            CallKind::Seed => fakes::kernel("FAKE-SCORE:1.1 seed two"),
            CallKind::Analysis => fakes::analysis(false),
            _ => fakes::kernel(&format!("FAKE-SCORE:3.0 {}", call.key)),
        })
    };
    // Step mode: a gate before every call, where the run can be stopped.
    let config = PipelineConfig {
        mode: Mode::Step,
        ..pipeline()
    };
    // The person: at the first stages gate (about the faster seed) marks the other seed
    // final, then approves that first gate; approves every other gate. `stop_at_stage`:
    // stops the run at the gate before that stage's call.
    let person = |stop_at_stage: Option<&'static str>| -> Person {
        let mut asked = 0;
        let mut seeds = BTreeMap::new();
        Box::new(move |event| match event {
            Event::CandidateCreated { id, key, .. } if key.starts_with("seed") => {
                seeds.insert(key.clone(), *id);
                vec![]
            }
            Event::GateOpened {
                gate,
                kind: GateKind::Stages,
                candidate,
                ..
            } => {
                asked += 1;
                let approve = Command::Resolve {
                    gate: *gate,
                    decision: Decision::Approve,
                };
                if asked == 1 {
                    assert_eq!(*candidate, seeds.get("seed1").copied());
                    vec![
                        Command::MarkFinal {
                            candidate: seeds["seed2"],
                        },
                        approve,
                    ]
                } else {
                    vec![approve]
                }
            }
            Event::GateOpened { key, .. }
                if stop_at_stage.is_some_and(|s| *key == format!("call/stage/{s}")) =>
            {
                vec![Command::Stop]
            }
            Event::GateOpened { gate, .. } => vec![Command::Resolve {
                gate: *gate,
                decision: Decision::Approve,
            }],
            _ => vec![],
        })
    };
    let stage_calls = |state: &SessionState| -> Vec<(String, Option<CandidateId>)> {
        state
            .calls
            .values()
            .filter(|c| c.kind == CallKind::Stage && c.ok == Some(true))
            .map(|c| (c.key.clone(), c.candidate))
            .collect()
    };
    let eval = Arc::new(FakeEvaluator::default());

    let live = dir();
    let llm = Arc::new(FakeLlm::new(script));
    let (outcome, state) = run_with(
        &live.session,
        SessionState::default(),
        &eval,
        &llm,
        config.clone(),
        Device::Cuda(0),
        person(None),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let seed2 = state
        .candidates
        .values()
        .find(|c| c.key == "seed2")
        .unwrap()
        .id;
    let stages: Vec<_> = state
        .gates
        .values()
        .filter(|g| g.kind == GateKind::Stages)
        .collect();
    assert_eq!(stages.len(), 2, "{stages:?}");
    assert!(
        stages[0].withdrawn && stages[0].decision.is_none(),
        "{stages:?}"
    );
    assert_eq!(stages[1].candidate, Some(seed2));
    assert_eq!(stages[1].decision, Some(Decision::Approve));
    let withdrawn = state.log.iter().any(|l| l.message.contains("marked final"));
    assert!(withdrawn, "the withdrawal says why");
    let uninterrupted = stage_calls(&state);
    assert_eq!(uninterrupted.len(), 3);
    assert_eq!(
        uninterrupted[0],
        ("stage/grid_and_parallel".into(), Some(seed2))
    );

    // Stopped at each stage's call, then resumed: the same stage calls on the same bases.
    for stop_at in ["grid_and_parallel", "block_tiling", "memory_and_tuning"] {
        let d = dir();
        let llm = Arc::new(FakeLlm::new(script));
        run_with(
            &d.session,
            SessionState::default(),
            &eval,
            &llm,
            config.clone(),
            Device::Cuda(0),
            person(Some(stop_at)),
        )
        .await;
        let prior = SessionState::from_records(&d.session.read_events().unwrap().records);
        let gates_before = prior.gates.len();
        assert!(
            stage_calls(&prior).len() < 3,
            "{stop_at}: the stop came too late"
        );
        let resumed = Arc::new(FakeLlm::new(script));
        let (outcome, state) = run_with(
            &d.session,
            prior,
            &eval,
            &resumed,
            config.clone(),
            Device::Cuda(0),
            approve_all(),
        )
        .await;
        assert_eq!(
            outcome.end,
            RunEnd::Complete,
            "{stop_at}: {}",
            outcome.reason
        );
        assert_eq!(stage_calls(&state), uninterrupted, "{stop_at}");
        assert!(
            state
                .gates
                .values()
                .skip(gates_before)
                .all(|g| g.kind != GateKind::Stages),
            "{stop_at}: the approved stages gate was asked again"
        );
        assert!(state.calls.values().all(|c| c.ok.is_some()), "{stop_at}");
    }
}

#[tokio::test]
async fn the_person_can_ask_a_failed_call_again() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let down = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let llm = {
        let down = down.clone();
        Arc::new(FakeLlm::new(move |_: &LlmCall| {
            if down.load(std::sync::atomic::Ordering::SeqCst) {
                Reply::Failed("HTTP 502".into())
            } else {
                Reply::Text(fakes::kernel("asked again"))
            }
        }))
    };
    let config = PipelineConfig {
        seeds: 1,
        call_reasks: 0,
        ..pipeline()
    };
    let engine = engine_on(&d.session, &eval, &llm, config);
    let outcome = engine.run().await;
    assert_eq!(outcome.end, RunEnd::NoAnswer);
    down.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut events = engine.subscribe();
    engine.command(Command::Reask { call: CallId(1) });
    // The action runs on its own: wait for its evaluation.
    let evaluated = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(r) = events.recv().await {
            if let Event::EvalFinished { candidate, .. } = r.event {
                return candidate;
            }
        }
        unreachable!()
    })
    .await
    .unwrap();
    let state = engine.state();
    let c = &state.candidates[&evaluated];
    assert_eq!(c.kind, CandidateKind::Reasked { call: CallId(1) });
    assert!(c.is_correct());
    assert_eq!(c.call, Some(CallId(2)));
    assert_eq!(llm.calls()[1].request.messages[0].content, {
        d.session.read_file("llm/1.prompt.md").unwrap()
    });
    engine.stop_actions();
}

#[tokio::test]
async fn an_evaluator_that_breaks_fails_the_run() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    *eval.broken.lock().unwrap() = Some("the judge server died".into());
    let llm = Arc::new(FakeLlm::new(standard));
    let (outcome, state) = run(&d.session, &eval, &llm, pipeline(), Device::Cpu).await;
    assert_eq!(outcome.end, RunEnd::Failed);
    assert!(
        outcome.reason.contains("judge server died"),
        "{}",
        outcome.reason
    );
    assert!(state.candidates.values().all(|c| c.eval.is_none()));
}

#[tokio::test]
async fn a_result_file_removed_by_hand_is_evaluated_again_on_resume_not_invented() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        max_tokens: Some(4000),
        ..pipeline()
    };
    let (_, stopped) = run(&d.session, &eval, &llm, config, Device::Cpu).await;
    let evaluated_before = eval.evaluated().len();
    let victim = stopped
        .candidates
        .values()
        .find(|c| c.is_correct())
        .unwrap()
        .clone();
    std::fs::remove_file(d.session.file(victim.eval_file.as_deref().unwrap())).unwrap();
    let (outcome, state) = run_with(
        &d.session,
        stopped,
        &eval,
        &Arc::new(FakeLlm::new(standard)),
        pipeline(),
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let again: Vec<String> = eval.evaluated()[evaluated_before..].to_vec();
    let code = d.session.read_file(&victim.file).unwrap();
    assert!(again.contains(&code), "the candidate was evaluated again");
    let c = &state.candidates[&victim.id];
    assert!(c.is_correct(), "{:?}", c.eval);
    assert!(d.session.file(c.eval_file.as_deref().unwrap()).is_file());
    assert!(state.candidates.values().all(|c| {
        c.eval
            .as_ref()
            .is_some_and(|e| e.category != Some(Category::Harness))
    }));
}

#[tokio::test]
async fn a_gate_waiting_when_the_run_stops_is_asked_again_on_resume_not_rejected() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Review,
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    // The person stops the run while the analysis gate waits.
    let person: Person = Box::new(|event| match event {
        Event::GateOpened { .. } => vec![Command::Stop],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config.clone(),
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Stopped);
    let gate = state.gates.values().next().unwrap();
    assert_eq!(gate.kind, GateKind::AlgorithmOptimization);
    assert!(gate.decision.is_none() && gate.withdrawn);
    assert!(
        state.open_gate().is_none(),
        "nothing waits on a stopped run"
    );
    assert!(!state.log.iter().any(|l| l.message.contains("skipped")));

    let (outcome, state) = run_with(
        &d.session,
        state,
        &eval,
        &llm,
        config,
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let asked: Vec<_> = state
        .gates
        .values()
        .filter(|g| g.kind == GateKind::AlgorithmOptimization)
        .map(|g| g.decision.clone())
        .collect();
    assert_eq!(asked, [None, Some(Decision::Approve)]);
    assert!(llm.calls().iter().any(|c| c.kind == CallKind::Analysis));
}

#[tokio::test]
async fn a_call_approved_while_paused_waits_for_the_resume() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Step,
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    let engine = Arc::new(engine_on(&d.session, &eval, &llm, config));
    let mut events = engine.subscribe();
    let run = {
        let engine = engine.clone();
        tokio::spawn(async move { engine.run().await })
    };
    // The first gate is the seed's prompt: pause, then approve it.
    let gate = loop {
        if let Event::GateOpened { gate, .. } = events.recv().await.unwrap().event {
            break gate;
        }
    };
    engine.command(Command::Pause);
    engine.command(Command::Resolve {
        gate,
        decision: Decision::Approve,
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(llm.calls().is_empty(), "nothing is sent while paused");
    engine.command(Command::Resume);
    let next = loop {
        if let Event::GateOpened { kind, .. } = events.recv().await.unwrap().event {
            break kind;
        }
    };
    assert_eq!(next, GateKind::Evaluation);
    assert_eq!(llm.calls().len(), 1, "sent after the resume");
    engine.stop();
    run.await.unwrap();
}

#[tokio::test]
async fn two_windows_answering_one_gate_the_second_is_told_it_lost() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Review,
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    let person: Person = Box::new(|event| match event {
        Event::GateOpened { gate, .. } => vec![
            Command::Resolve {
                gate: *gate,
                decision: Decision::Approve,
            },
            Command::Resolve {
                gate: *gate,
                decision: Decision::Rewrite {
                    text: "edited".into(),
                },
            },
        ],
        _ => vec![],
    });
    let (_, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config,
        Device::Cpu,
        person,
    )
    .await;
    let told: Vec<&str> = state
        .log
        .iter()
        .filter(|l| l.tag == "you")
        .map(|l| l.message.as_str())
        .collect();
    assert!(
        told.contains(&"gate 1 was already answered (approve); your rewrite was not applied"),
        "{told:?}"
    );
    assert!(
        told.iter()
            .all(|m| !m.contains('{') && !m.contains("Some(")),
        "no debug output: {told:?}"
    );
}

#[tokio::test]
async fn marking_final_after_the_run_rewrites_the_result_files() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        seeds: 2,
        stages: vec![],
        ..pipeline()
    };
    let engine = engine_on(&d.session, &eval, &llm, config);
    let outcome = engine.run().await;
    assert_eq!(outcome.end, RunEnd::Complete);
    let state = engine.state();
    let other = state
        .candidates
        .values()
        .find(|c| c.is_correct() && Some(c.id) != state.best)
        .unwrap()
        .clone();
    engine.command(Command::MarkFinal {
        candidate: other.id,
    });
    assert_eq!(engine.state().best, Some(other.id));
    assert_eq!(
        d.session.read_file("best_kernel.py").unwrap(),
        d.session.read_file(&other.file).unwrap()
    );
    assert!(
        d.session
            .read_file("report.md")
            .unwrap()
            .contains(&format!("#{} ", other.id))
    );
    engine.stop_actions();
}

/// The gates of `kind` the run asked (opened), in order, with their decisions.
fn asked(state: &SessionState, kind: GateKind) -> Vec<Option<Decision>> {
    state
        .gates
        .values()
        .filter(|g| g.kind == kind)
        .map(|g| g.decision.clone())
        .collect()
}

fn said(state: &SessionState, text: &str) -> usize {
    state
        .log
        .iter()
        .filter(|l| l.message.contains(text))
        .count()
}

/// Issue 23, item 4: "approve all gates of this kind" answers the gate waiting and every
/// later one of that kind, never another kind, and a resumed run keeps it.
#[tokio::test]
async fn a_standing_approval_answers_its_kind_only_and_survives_resume() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Step,
        seeds: 2,
        max_concurrent_calls: 1,
        stages: vec![],
        ..pipeline()
    };
    // The first prompt gate: approve all LLM calls (no answer to the gate itself); the
    // evaluation gates are answered one by one, and the run stops at the second.
    let mut evaluations = 0;
    let person: Person = Box::new(move |event| match event {
        Event::GateOpened {
            gate,
            kind: GateKind::Evaluation,
            ..
        } => {
            evaluations += 1;
            if evaluations == 2 {
                vec![Command::Stop]
            } else {
                vec![Command::Resolve {
                    gate: *gate,
                    decision: Decision::Approve,
                }]
            }
        }
        Event::GateOpened {
            kind: GateKind::LlmCall,
            ..
        } => vec![Command::ApproveAlways {
            kind: GateKind::LlmCall,
        }],
        Event::GateOpened { gate, .. } => vec![Command::Resolve {
            gate: *gate,
            decision: Decision::Approve,
        }],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config.clone(),
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Stopped, "{}", outcome.reason);
    assert_eq!(state.standing, vec![GateKind::LlmCall]);
    assert_eq!(
        asked(&state, GateKind::LlmCall),
        [Some(Decision::Approve)],
        "only the first prompt gate was asked; it was approved by the standing approval"
    );
    assert_eq!(
        asked(&state, GateKind::Evaluation).len(),
        2,
        "other kinds are asked"
    );
    assert!(
        llm.calls().len() >= 2,
        "later calls went out without asking"
    );
    assert!(said(&state, "gate 1 approved: you approved all LLM calls") == 1);
    assert!(said(&state, "approved without asking") >= 1);
    // Recorded before it took effect: the event comes before the gate's answer.
    let events = d.session.read_events().unwrap().records;
    let at = |f: &dyn Fn(&Event) -> bool| events.iter().position(|r| f(&r.event)).unwrap();
    assert!(
        at(&|e| matches!(e, Event::StandingApproval { .. }))
            < at(&|e| matches!(e, Event::GateResolved { .. }))
    );

    // Resumed in the session's mode: no prompt gate is asked, evaluations still are.
    let calls_before = llm.calls().len();
    let (outcome, after) = run_with(
        &d.session,
        state.clone(),
        &eval,
        &llm,
        config,
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert_eq!(after.standing, vec![GateKind::LlmCall]);
    assert_eq!(
        asked(&after, GateKind::LlmCall),
        asked(&state, GateKind::LlmCall),
        "no prompt gate after the resume"
    );
    assert!(
        llm.calls().len() > calls_before,
        "the resumed run made calls"
    );
    assert!(asked(&after, GateKind::Evaluation).len() > 2);
}

/// Issue 39, item 2: a standing approval is taken back without approving anything: the
/// evaluation gate waiting when it is revoked still waits for its own answer, and later
/// prompt gates are asked again; the revocation is recorded before it takes effect.
#[tokio::test]
async fn a_standing_approval_is_taken_back_and_approves_nothing() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Step,
        seeds: 1,
        max_concurrent_calls: 1,
        stages: vec![],
        ..pipeline()
    };
    // The first prompt gate: approve all LLM calls. The first evaluation gate: take that
    // back, then answer it. Every later gate: approve.
    let mut first_evaluation = true;
    let person: Person = Box::new(move |event| match event {
        Event::GateOpened {
            kind: GateKind::LlmCall,
            gate,
            ..
        } if gate.0 == 1 => vec![Command::ApproveAlways {
            kind: GateKind::LlmCall,
        }],
        Event::GateOpened {
            gate,
            kind: GateKind::Evaluation,
            ..
        } if first_evaluation => {
            first_evaluation = false;
            vec![
                Command::RevokeApprovals {
                    kind: Some(GateKind::LlmCall),
                },
                Command::Resolve {
                    gate: *gate,
                    decision: Decision::Approve,
                },
            ]
        }
        Event::GateOpened { gate, .. } => vec![Command::Resolve {
            gate: *gate,
            decision: Decision::Approve,
        }],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config,
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert!(state.standing.is_empty());
    assert_eq!(
        said(
            &state,
            "approval taken back (LLM calls); LLM calls are asked again"
        ),
        1
    );
    let prompts = asked(&state, GateKind::LlmCall);
    assert!(
        prompts.len() > 1,
        "prompt gates are asked again after the revocation: {prompts:?}"
    );
    // Nothing was approved by the revocation itself: only the first prompt gate was
    // answered by a standing approval.
    assert_eq!(said(&state, "approved: you approved all LLM calls"), 1);
    let events = d.session.read_events().unwrap().records;
    let at = |f: &dyn Fn(&Event) -> bool| events.iter().position(|r| f(&r.event)).unwrap();
    let revoked = at(&|e| matches!(e, Event::StandingApprovalRevoked { .. }));
    let second_prompt = events
        .iter()
        .filter(|r| {
            matches!(
                r.event,
                Event::GateOpened {
                    kind: GateKind::LlmCall,
                    ..
                }
            )
        })
        .nth(1)
        .map(|r| events.iter().position(|x| x.seq == r.seq).unwrap())
        .unwrap();
    assert!(
        revoked < second_prompt,
        "recorded before the next prompt gate"
    );
}

/// Issue 23, item 4: switching from step to review mid-run approves the gates waiting
/// that review mode does not ask and asks none of them later; a resumed run goes on in
/// the latest mode of the log; `kforge resume --mode step` (another mode in the setup)
/// is recorded and ends the standing approvals.
#[tokio::test]
async fn a_mode_switch_releases_waiting_gates_and_holds_across_resume() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(standard));
    let config = PipelineConfig {
        mode: Mode::Step,
        seeds: 1,
        stages: vec![],
        ..pipeline()
    };
    // At the first gate (the seed's prompt): review mode, and all stage gates approved;
    // the run stops at the next gate (algorithm optimization, which review mode asks).
    let person: Person = Box::new(|event| match event {
        Event::GateOpened {
            kind: GateKind::LlmCall,
            ..
        } => vec![
            Command::ApproveAlways {
                kind: GateKind::Stages,
            },
            Command::SetMode { mode: Mode::Review },
        ],
        Event::GateOpened { .. } => vec![Command::Stop],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config.clone(),
        Device::Cpu,
        person,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Stopped, "{}", outcome.reason);
    assert_eq!(state.mode, Mode::Review);
    assert_eq!(state.info.as_ref().unwrap().mode, Mode::Step);
    assert_eq!(asked(&state, GateKind::LlmCall), [Some(Decision::Approve)]);
    assert!(
        asked(&state, GateKind::Evaluation).is_empty(),
        "review mode does not ask"
    );
    assert_eq!(asked(&state, GateKind::AlgorithmOptimization), [None]);
    assert_eq!(
        said(&state, "gate 1 approved: review mode does not stop there"),
        1
    );
    assert_eq!(said(&state, "now in review mode (was step)"), 1);

    // Resumed as `kforge resume` does (the latest mode of the log): still review mode.
    let resumed = PipelineConfig {
        mode: state.mode,
        ..config.clone()
    };
    let stop_at_gate: Person = Box::new(|event| match event {
        Event::GateOpened { .. } => vec![Command::Stop],
        _ => vec![],
    });
    let (outcome, state) = run_with(
        &d.session,
        state,
        &eval,
        &llm,
        resumed,
        Device::Cpu,
        stop_at_gate,
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Stopped, "{}", outcome.reason);
    assert_eq!(
        asked(&state, GateKind::AlgorithmOptimization),
        [None, None],
        "asked again"
    );
    assert!(
        asked(&state, GateKind::LlmCall).len() == 1
            && asked(&state, GateKind::Evaluation).is_empty()
    );
    assert_eq!(state.standing, vec![GateKind::Stages]);

    // `kforge resume --mode step`: recorded, every gate asked again, approvals ended.
    let (outcome, state) = run_with(
        &d.session,
        state,
        &eval,
        &llm,
        config,
        Device::Cpu,
        approve_all(),
    )
    .await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    assert_eq!(state.mode, Mode::Step);
    assert!(state.standing.is_empty());
    assert_eq!(said(&state, "now in step mode (was review)"), 1);
    assert!(
        asked(&state, GateKind::LlmCall).len() > 1,
        "prompts are asked again"
    );
    assert!(!asked(&state, GateKind::Evaluation).is_empty());
}

/// Issue 25: a kernel flagged `faster_than_light` is not the session's best, however high
/// its score, until the person marks it final.
#[tokio::test]
async fn a_faster_than_light_kernel_is_the_best_only_when_the_person_marks_it_final() {
    let script = |call: &LlmCall| {
        Reply::Text(match call.key.as_str() {
            "seed1" => fakes::kernel("FAKE-SCORE:1.2 honest"),
            _ => fakes::kernel("FAKE-SCORE:40 FAKE-FLAG:faster_than_light"),
        })
    };
    let config = PipelineConfig {
        seeds: 2,
        analyze: AnalyzeWhen::Slow,
        stages: vec![],
        ..pipeline()
    };
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(script));
    let (outcome, state) = run(&d.session, &eval, &llm, config.clone(), Device::Cuda(0)).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let flagged = state
        .candidates
        .values()
        .find(|c| c.faster_than_light())
        .unwrap();
    let honest = state
        .candidates
        .values()
        .find(|c| c.score() == Some(1.2))
        .unwrap();
    assert!(flagged.is_correct() && flagged.score() == Some(40.0));
    assert_eq!(state.best, Some(honest.id));
    assert_eq!(outcome.best, Some(honest.id));

    // Marked final by the person (here at the final-best gate of a review run), it is the
    // best.
    let d = dir();
    let llm = Arc::new(FakeLlm::new(script));
    let seen = Arc::new(std::sync::Mutex::new(None));
    let person: Person = Box::new(move |event| match event {
        Event::EvalFinished {
            candidate, summary, ..
        } if summary.flags.iter().any(|f| f == "faster_than_light") => {
            *seen.lock().unwrap() = Some(*candidate);
            vec![]
        }
        Event::GateOpened { gate, .. } => {
            let mut commands: Vec<Command> = seen
                .lock()
                .unwrap()
                .map(|candidate| Command::MarkFinal { candidate })
                .into_iter()
                .collect();
            commands.push(Command::Resolve {
                gate: *gate,
                decision: Decision::Approve,
            });
            commands
        }
        _ => vec![],
    });
    let config = PipelineConfig {
        mode: Mode::Review,
        ..config
    };
    let (outcome, state) = run_with(
        &d.session,
        SessionState::default(),
        &eval,
        &llm,
        config,
        Device::Cuda(0),
        person,
    )
    .await;
    let flagged = state
        .candidates
        .values()
        .find(|c| c.faster_than_light())
        .unwrap();
    assert_eq!(state.best, Some(flagged.id), "{}", outcome.reason);
    assert_eq!(outcome.best, Some(flagged.id));
}

/// Issue 25: a stage whose kernel is flagged `faster_than_light` keeps its base (the next
/// stage works on the base, not on the flagged kernel).
#[tokio::test]
async fn a_faster_than_light_stage_kernel_does_not_replace_its_base() {
    let d = dir();
    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        Reply::Text(match call.kind {
            CallKind::Seed => fakes::kernel("FAKE-SCORE:1.2 seed"),
            CallKind::Stage if call.key.contains("grid_and_parallel") => {
                fakes::kernel("FAKE-SCORE:50 FAKE-FLAG:faster_than_light")
            }
            _ => fakes::kernel(&format!("FAKE-SCORE:1.3 {}", call.key)),
        })
    }));
    let config = PipelineConfig {
        seeds: 1,
        analyze: AnalyzeWhen::Slow,
        ..pipeline()
    };
    let (outcome, state) = run(&d.session, &eval, &llm, config, Device::Cuda(0)).await;
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let first = &state.stages[0];
    assert!(!first.accepted, "{first:?}");
    assert!(
        first.reason.contains("faster_than_light"),
        "{}",
        first.reason
    );
    // The second stage started from the seed, the base the flagged kernel did not replace.
    assert_eq!(state.stages[1].base, state.stages[0].base);
    assert!(
        state
            .candidates
            .get(&state.best.unwrap())
            .is_some_and(|c| !c.faster_than_light())
    );
}
