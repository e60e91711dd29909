//! Sessions written before `src/protocol/` existed still open, fold and resume
//! (`tests/fixtures/sessions/README.md` says how the golden session was made).

use std::path::Path;
use std::sync::Arc;

use kforge::config::pipeline::PipelineConfig;
use kforge::engine::fakes::{self, FakeEvaluator, FakeLlm, Reply};
use kforge::engine::ports::LlmCall;
use kforge::engine::runner::Engine;
use kforge::eval::Device;
use kforge::protocol::{
    CallKind, CandidateId, CandidateKind, Category, EngineState, EventRecord, GateKind, Mode,
    RunEnd,
};
use kforge::session::state::{CandidateStatus, SessionState};
use kforge::session::store::SessionDir;

const GOLDEN: &str = "tests/fixtures/sessions/v1_review_budget";

fn golden_copy() -> (tempfile::TempDir, SessionDir) {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("session");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join(GOLDEN), &to);
    (tmp, SessionDir::open(&to).unwrap())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[test]
fn every_line_of_the_old_format_reads_and_writes_back_byte_for_byte() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(GOLDEN)
            .join("events.jsonl"),
    )
    .unwrap();
    let mut types = std::collections::BTreeSet::new();
    for (n, line) in text.lines().enumerate() {
        let record: EventRecord =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}\n{line}", n + 1));
        assert_eq!(
            serde_json::to_string(&record).unwrap(),
            line,
            "line {} changed when written back",
            n + 1
        );
        types.insert(
            line.split("\"type\":\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .to_string(),
        );
    }
    // The golden session covers the events a real run writes most.
    for t in [
        "session_started",
        "candidate_created",
        "llm_call_finished",
        "eval_finished",
        "analysis_ready",
        "gate_opened",
        "gate_resolved",
        "stage_finished",
        "persistent_check",
        "best_changed",
        "mode_changed",
        "budget_exhausted",
        "session_finished",
    ] {
        assert!(types.contains(t), "the golden session has no {t}");
    }
}

#[test]
fn the_old_session_folds_into_typed_state() {
    let (_tmp, session) = golden_copy();
    let read = session.read_events().unwrap();
    assert!(read.torn.is_none() && read.invalid.is_empty());
    let state = SessionState::from_records(&read.records);
    assert_eq!(state.state, EngineState::Stopped);
    assert_eq!(state.mode, Mode::Review);
    assert!(
        state
            .budget_exhausted
            .as_deref()
            .unwrap()
            .contains("tokens")
    );
    assert_eq!(state.candidates.len(), 6);
    let evaluated = state
        .candidates
        .values()
        .filter(|c| c.eval.is_some())
        .count();
    assert_eq!(evaluated, 5);
    let broken = &state.candidates[&CandidateId(2)];
    assert_eq!(broken.status, CandidateStatus::Failed);
    assert_eq!(
        broken.eval.as_ref().unwrap().category,
        Some(Category::Compile)
    );
    let analysed: Vec<_> = state
        .candidates
        .values()
        .filter_map(|c| c.analysis.as_ref())
        .collect();
    assert_eq!(analysed.len(), 2);
    assert!(analysed.iter().all(|a| a.worth_optimizing == Some(true)));
    assert_eq!(
        state.candidates[&CandidateId(6)].kind,
        CandidateKind::Stage {
            name: "grid_and_parallel".into(),
            index: 1
        }
    );
    assert_eq!(
        state.candidates[&CandidateId(6)].status,
        CandidateStatus::Pending
    );
    // The one notion of best: on the CPU, where nothing is timed, the earliest correct one.
    assert_eq!(state.best, Some(CandidateId(1)));
    assert!(state.end.is_none(), "written before the end was recorded");
}

#[tokio::test]
async fn the_old_session_resumes_without_asking_answered_calls_again() {
    let (_tmp, session) = golden_copy();
    let read = session.read_events().unwrap();
    let prior = SessionState::from_records(&read.records);
    let description: serde_json::Value =
        serde_json::from_str(&session.read_file("session.json").unwrap()).unwrap();
    let mut pipeline: PipelineConfig =
        serde_json::from_value(description["pipeline"].clone()).unwrap();
    pipeline.max_tokens = None;
    pipeline.sessions_dir = None;
    // A CPU session: its stages run only when asked for (`speed_calls_on_cpu`, absent from
    // the old session.json, so off).
    assert!(!pipeline.speed_calls_on_cpu);
    pipeline.speed_calls_on_cpu = true;
    let device: Device = serde_json::from_value(description["device"].clone()).unwrap();
    let answered: Vec<String> = prior
        .calls
        .values()
        .filter(|c| c.ok == Some(true))
        .map(|c| c.key.clone())
        .collect();

    let eval = Arc::new(FakeEvaluator::default());
    let llm = Arc::new(FakeLlm::new(|call: &LlmCall| {
        Reply::Text(fakes::kernel(&format!("resumed {}", call.key)))
    }));
    let mut setup = fakes::setup(
        session.clone(),
        prior,
        eval.clone(),
        llm.clone(),
        pipeline,
        device,
    );
    // The session's own task, not the fakes' one.
    setup.task = kforge::task::TaskFile::load(&session.file("task.py")).unwrap();
    let engine = Arc::new(Engine::new(setup).unwrap());
    let steering = fakes::steer(&engine, fakes::approve_every_gate);
    let outcome = engine.run().await;
    steering.abort();
    assert_eq!(outcome.end, RunEnd::Complete, "{}", outcome.reason);
    let calls = llm.calls();
    assert!(
        calls.iter().all(|c| !answered.contains(&c.key)),
        "answered calls were sent again: {:?}",
        calls.iter().map(|c| &c.key).collect::<Vec<_>>()
    );
    // What was left: the two remaining stages.
    assert_eq!(
        calls
            .iter()
            .map(|c| (c.kind, c.key.as_str()))
            .collect::<Vec<_>>(),
        [
            (CallKind::Stage, "stage/block_tiling"),
            (CallKind::Stage, "stage/memory_and_tuning")
        ]
    );
    // The stage kernel created before the stop is evaluated now, not made again.
    assert_eq!(eval.evaluated().len(), 3);
    let state = SessionState::from_records(&session.read_events().unwrap().records);
    assert_eq!(state.resumes, 1);
    assert_eq!(state.candidates.len(), 8);
    assert!(state.candidates.values().all(|c| c.eval.is_some()));
    assert_eq!(state.stages.len(), 3);
    // The gates answered in the first run were not asked again; only the final one was.
    let asked_now: Vec<GateKind> = state
        .gates
        .values()
        .filter(|g| g.id.0 > 3)
        .map(|g| g.kind)
        .collect();
    assert_eq!(asked_now, [GateKind::FinalBest]);
    assert_eq!(state.end, Some(RunEnd::Complete));
    // The finish wrote the report and its chart. On the CPU nothing is timed: no point,
    // a cross for each of the eight evaluated candidates, and a note that says why.
    let chart = session.read_file("score_timeline.svg").unwrap();
    assert!(chart.starts_with("<svg") && chart.trim_end().ends_with("</svg>"));
    assert!(chart.contains("no timed correct candidate"), "{chart}");
    assert_eq!(chart.matches("<circle").count(), 0);
    assert_eq!(chart.matches("stroke=\"#D62728\"").count(), 2 * 8);
    assert!(
        session
            .read_file("report.md")
            .unwrap()
            .contains("\n![score timeline](score_timeline.svg)\n")
    );
}
