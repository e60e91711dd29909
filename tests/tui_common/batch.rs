//! A batch directory for the batch view's tests, written the way kforge writes one:
//! batch.json through `Manifest::save`, each task's session through `SessionDir::create_at`
//! and `EventWriter`, a refused task's refused.json. Its tasks, in order:
//!
//! | key | state |
//! |---|---|
//! | `L1_019_ReLU` | finished complete, 1.52x on cuda:0 |
//! | `L1_023_Softmax` | finished no_correct_kernel (one call unpriced) |
//! | `L1_040_LayerNorm` | interrupted: started, a kernel under evaluation, never finished |
//! | `L2_011_Gemm` | running: a call in flight, the session lock held by the fixture |
//! | `L1_033_BatchNorm` | finished complete on the CPU: correct, not timed |
//! | `L2_001_Conv2D_ReLU` | waiting: no session |
//! | `L2_099_Broken` | refused by the task check |

use std::path::{Path, PathBuf};

use kforge::batch::manifest::{BatchLimits, BatchTask, Manifest, REFUSED_FILE};
use kforge::config::EvalConfig;
use kforge::config::pipeline::PipelineConfig;
use kforge::eval::devices::DeviceChoice;
use kforge::protocol::{
    CallId, CallKind, CandidateId, CandidateKind, Category, EngineState, EvalSummary, Event, Mode,
    RunEnd, TaskKey, TokenUsage,
};
use kforge::session::store::{EventWriter, SessionDir, SessionLock};

pub const COMPLETE: &str = "L1_019_ReLU";
pub const NO_CORRECT: &str = "L1_023_Softmax";
pub const INTERRUPTED: &str = "L1_040_LayerNorm";
pub const RUNNING: &str = "L2_011_Gemm";
pub const CPU: &str = "L1_033_BatchNorm";
pub const WAITING: &str = "L2_001_Conv2D_ReLU";
pub const REFUSED: &str = "L2_099_Broken";
pub const REFUSED_WHY: &str = "task: no class Model in the file";

/// The batch on disk; the running task's session lock is held while this lives.
pub struct BatchFixture {
    pub dir: PathBuf,
    _running: SessionLock,
}

fn task(key: &str) -> BatchTask {
    let level = key[1..2].parse().ok();
    let problem = key[3..6].parse().ok();
    BatchTask {
        key: TaskKey(key.into()),
        name: key[7..].to_string(),
        level,
        problem,
        origin: format!("/kb/KernelBench/level{}/{}.py", &key[1..2], &key[3..]).into(),
    }
}

fn session(batch: &Path, key: &str, timed: bool) -> (SessionDir, EventWriter) {
    let dir = SessionDir::create_at(&batch.join("tasks").join(key)).unwrap();
    let mut w = EventWriter::open(&dir, 0).unwrap();
    w.append(Event::SessionStarted {
        task: key.into(),
        task_hash: "0".into(),
        provider: "openai".into(),
        model: "gpt-x".into(),
        mode: Mode::Auto,
        device: if timed { "cuda:0" } else { "cpu" }.into(),
        timing_meaningful: timed,
        precision: Some(kforge::protocol::PrecisionPolicy::Strict),
    })
    .unwrap();
    (dir, w)
}

/// A seed call and its kernel: call `n`, candidate `n`.
fn seed(w: &mut EventWriter, n: u32, cost: Option<f64>) {
    w.append(Event::LlmCallStarted {
        call: CallId(n),
        key: format!("seed{n}"),
        kind: CallKind::Seed,
        candidate: None,
        provider: "openai".into(),
        model: "gpt-x".into(),
        prompt_file: format!("llm/{n}.prompt.md"),
    })
    .unwrap();
    w.append(Event::LlmCallFinished {
        call: CallId(n),
        ok: true,
        error: None,
        usage: TokenUsage {
            input: 1000,
            output: 250,
            ..Default::default()
        },
        cost_usd: cost,
        latency_s: 2.0,
        response_file: None,
    })
    .unwrap();
    w.append(Event::CandidateCreated {
        id: CandidateId(n),
        key: format!("seed{n}"),
        parent: None,
        kind: CandidateKind::Seed {
            index: n,
            direction: None,
        },
        file: format!("kernels/{n}-seed.py"),
        call: Some(CallId(n)),
    })
    .unwrap();
    w.append(Event::EvalStarted {
        candidate: CandidateId(n),
    })
    .unwrap();
}

fn verdict(w: &mut EventWriter, n: u32, summary: EvalSummary) {
    w.append(Event::EvalFinished {
        candidate: CandidateId(n),
        result_file: format!("eval/{n}.json"),
        summary,
    })
    .unwrap();
}

fn finish(w: &mut EventWriter, best: Option<u32>, end: RunEnd) {
    w.append(Event::StateChanged {
        state: EngineState::Finished,
    })
    .unwrap();
    w.append(Event::SessionFinished {
        best: best.map(CandidateId),
        reason: end.word().into(),
        end: Some(end),
    })
    .unwrap();
}

fn failed(category: Category) -> EvalSummary {
    EvalSummary {
        correct: false,
        category: Some(category),
        summary: "wrong".into(),
        ..Default::default()
    }
}

/// Writes the batch into `dir` (made if missing; its name shows on screen).
pub fn write_batch(dir: &Path) -> BatchFixture {
    std::fs::create_dir_all(dir).unwrap();
    let keys = [
        COMPLETE,
        NO_CORRECT,
        INTERRUPTED,
        RUNNING,
        CPU,
        WAITING,
        REFUSED,
    ];
    Manifest::new(
        "openai".into(),
        "gpt-x".into(),
        None,
        DeviceChoice::AllVisible,
        BatchLimits {
            tasks_at_once: 2,
            llm_calls_at_once: 4,
            max_tokens: None,
            max_cost_usd: None,
            max_wall_s: None,
        },
        PipelineConfig::default(),
        EvalConfig::default(),
        keys.iter().map(|k| task(k)).collect(),
    )
    .save(dir)
    .unwrap();

    let (_, mut w) = session(dir, COMPLETE, true);
    seed(&mut w, 1, Some(0.0123));
    verdict(&mut w, 1, failed(Category::Compile));
    seed(&mut w, 2, Some(0.0100));
    verdict(
        &mut w,
        2,
        EvalSummary {
            correct: true,
            summary: "correct".into(),
            score: Some(1.52),
            score_low: Some(1.49),
            score_high: Some(1.55),
            kernel_ms: Some(0.1),
            reference_ms: Some(0.152),
            device: Some("cuda:0".into()),
            ..Default::default()
        },
    );
    w.append(Event::BestChanged {
        candidate: CandidateId(2),
        score: Some(1.52),
    })
    .unwrap();
    finish(&mut w, Some(2), RunEnd::Complete);

    let (_, mut w) = session(dir, NO_CORRECT, true);
    seed(&mut w, 1, Some(0.0050));
    verdict(&mut w, 1, failed(Category::Mismatch));
    seed(&mut w, 2, None);
    verdict(&mut w, 2, failed(Category::Runtime));
    finish(&mut w, None, RunEnd::NoCorrectKernel);

    let (_, mut w) = session(dir, INTERRUPTED, true);
    seed(&mut w, 1, Some(0.0020));

    let (running, mut w) = session(dir, RUNNING, true);
    w.append(Event::LlmCallStarted {
        call: CallId(1),
        key: "seed1".into(),
        kind: CallKind::Seed,
        candidate: None,
        provider: "openai".into(),
        model: "gpt-x".into(),
        prompt_file: "llm/1.prompt.md".into(),
    })
    .unwrap();
    let lock = running.lock().unwrap();

    let (_, mut w) = session(dir, CPU, false);
    seed(&mut w, 1, Some(0.0030));
    verdict(
        &mut w,
        1,
        EvalSummary {
            correct: true,
            summary: "correct".into(),
            device: Some("cpu".into()),
            ..Default::default()
        },
    );
    finish(&mut w, Some(1), RunEnd::Complete);

    let refused = dir.join("tasks").join(REFUSED);
    std::fs::create_dir_all(&refused).unwrap();
    std::fs::write(
        refused.join(REFUSED_FILE),
        serde_json::json!({ "summary": REFUSED_WHY }).to_string(),
    )
    .unwrap();

    BatchFixture {
        dir: dir.to_path_buf(),
        _running: lock,
    }
}
