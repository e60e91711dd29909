//! The one event type and the one command type between the engine and anything that
//! shows or steers it (headless console, TUI, another process attached to a session).
//!
//! Events are self-contained: each line of `events.jsonl` is one `EventRecord`, and the
//! whole session state is a fold over them (`session::state`). Transient events (live
//! LLM text, evaluation phases) go to live subscribers only; what they carry is also
//! written to files (`llm/<call>.response.md` grows as the answer streams).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub type CandidateId = u32;
pub type CallId = u32;
pub type GateId = u32;

/// How much the engine stops for the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Never stops.
    #[default]
    Auto,
    /// Stops before algorithm optimization, before the stages and before the final best.
    Review,
    /// Stops before every LLM call and every evaluation.
    Step,
}

/// What produced a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CandidateKind {
    /// One of the N independent first generations.
    Seed { index: u32 },
    /// A repair of its parent; `attempt` counts from 1 within the repair loop.
    Repair { attempt: u32 },
    /// Written from an algorithm analysis of its parent.
    Algorithm,
    /// One of the tuning stages (`grid_and_parallel`, `block_tiling`, `memory_and_tuning`).
    Stage { name: String, index: u32 },
    /// Written or edited by the person.
    Manual,
    /// Repair or optimization of its parent with the person's instruction.
    Instructed { instruction: String },
}

impl CandidateKind {
    /// Short word for tags and file names: `seed`, `repair`, `algorithm`, `stage`, ...
    pub fn word(&self) -> &'static str {
        match self {
            CandidateKind::Seed { .. } => "seed",
            CandidateKind::Repair { .. } => "repair",
            CandidateKind::Algorithm => "algorithm",
            CandidateKind::Stage { .. } => "stage",
            CandidateKind::Manual => "manual",
            CandidateKind::Instructed { .. } => "instructed",
        }
    }
}

/// What an LLM call is for; also the name of its prompt template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Seed,
    Repair,
    Analysis,
    Optimize,
    Stage,
    Instructed,
}

impl CallKind {
    pub fn word(&self) -> &'static str {
        match self {
            CallKind::Seed => "seed",
            CallKind::Repair => "repair",
            CallKind::Analysis => "analysis",
            CallKind::Optimize => "optimize",
            CallKind::Stage => "stage",
            CallKind::Instructed => "instructed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum EngineState {
    #[default]
    Starting,
    Running,
    Paused,
    /// A gate is open: the engine waits for a decision.
    Waiting,
    Finished,
    Failed,
    /// Stopped by the person or a budget; resumable.
    Stopped,
}

impl EngineState {
    pub fn is_over(&self) -> bool {
        matches!(
            self,
            EngineState::Finished | EngineState::Failed | EngineState::Stopped
        )
    }
}

/// Where the engine stops for a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    /// Before an LLM call: approve sends the prompt, rewrite sends the edited prompt.
    LlmCall,
    /// Before evaluating a kernel: rewrite evaluates the edited kernel.
    Evaluation,
    AlgorithmOptimization,
    Stages,
    FinalBest,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    Approve,
    /// Skip the step or drop the candidate.
    Reject,
    /// Use this text instead (an edited prompt or kernel).
    Rewrite {
        text: String,
    },
}

/// Token usage of one call, normalized across providers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TokenUsage {
    pub input: u64,
    pub cached: u64,
    pub output: u64,
    pub reasoning: u64,
}

/// The part of an evaluation result that views need without opening `eval/<id>.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalSummary {
    pub correct: bool,
    /// Failure category (`compile`, `mismatch`, ...), `None` when correct.
    pub category: Option<String>,
    pub summary: String,
    /// Speedup over the reference; `None` without meaningful timing (CPU) or on failure.
    pub score: Option<f64>,
    pub kernel_ms: Option<f64>,
    pub reference_ms: Option<f64>,
    pub flags: Vec<String>,
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogLevel {
    Info,
    Warn,
    Error,
}

/// One line of `events.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub seq: u64,
    pub ts: DateTime<Utc>,
    #[serde(flatten)]
    pub event: Event,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    SessionStarted {
        task: String,
        task_hash: String,
        provider: String,
        model: String,
        mode: Mode,
        device: String,
        /// Whether scores are real speedups (GPU) or absent (CPU interpreter).
        timing_meaningful: bool,
    },
    /// A previous run of this session is being continued.
    SessionResumed {
        previous_seq: u64,
    },
    StateChanged {
        state: EngineState,
    },
    ModeChanged {
        mode: Mode,
    },
    CandidateCreated {
        id: CandidateId,
        /// Stable name of the pipeline step that made it (`seed1`, `seed1/repair2`,
        /// `opt3`, `stage/block_tiling`...): what a resumed run matches its work against.
        #[serde(default)]
        key: String,
        parent: Option<CandidateId>,
        #[serde(flatten)]
        kind: CandidateKind,
        /// Path of the kernel file relative to the session dir (`kernels/3-repair.py`).
        file: String,
        /// The LLM call that wrote it, if any.
        call: Option<CallId>,
    },
    /// A candidate was dropped (rejected at a gate, or its call failed).
    CandidateDropped {
        id: CandidateId,
        reason: String,
    },
    LlmCallStarted {
        call: CallId,
        /// Stable name of the step that made the call (see `CandidateCreated::key`).
        #[serde(default)]
        key: String,
        kind: CallKind,
        /// The candidate the call works on (repaired, analysed, optimized), if any.
        candidate: Option<CandidateId>,
        provider: String,
        model: String,
        /// `llm/<call>.prompt.md`.
        prompt_file: String,
    },
    /// Live text of a call in flight (transient: not written to events.jsonl).
    LlmDelta {
        call: CallId,
        text: String,
        reasoning: String,
    },
    LlmCallFinished {
        call: CallId,
        ok: bool,
        /// Error message when `!ok`.
        error: Option<String>,
        usage: TokenUsage,
        cost_usd: Option<f64>,
        latency_s: f64,
        /// `llm/<call>.response.md`, present when any answer text arrived.
        response_file: Option<String>,
    },
    EvalStarted {
        candidate: CandidateId,
    },
    /// Live phase of an evaluation (transient).
    EvalPhase {
        candidate: CandidateId,
        phase: String,
    },
    EvalFinished {
        candidate: CandidateId,
        /// `eval/<id>.json`.
        result_file: String,
        #[serde(flatten)]
        summary: EvalSummary,
    },
    /// The analysis JSON of a candidate (fields as the LLM gave them, normalized keys).
    AnalysisReady {
        candidate: CandidateId,
        call: CallId,
        analysis: serde_json::Value,
    },
    PersistentCheck {
        candidate: CandidateId,
        persistent: bool,
        reasons: Vec<String>,
    },
    StageFinished {
        stage: String,
        base: CandidateId,
        result: Option<CandidateId>,
        /// Whether the stage's kernel became the new base (regression protection).
        accepted: bool,
        reason: String,
    },
    BestChanged {
        candidate: CandidateId,
        score: Option<f64>,
    },
    GateOpened {
        gate: GateId,
        #[serde(default)]
        key: String,
        kind: GateKind,
        candidate: Option<CandidateId>,
        call: Option<CallId>,
        /// What the person is asked, one line.
        question: String,
        /// The file a rewrite edits (a prompt or a kernel), relative to the session dir.
        file: Option<String>,
    },
    GateResolved {
        gate: GateId,
        decision: Decision,
    },
    /// A console line: `tag` is `seed 2`, `analysis`, `stage 2/3`, `engine`, ...
    Log {
        level: LogLevel,
        tag: String,
        message: String,
    },
    BudgetExhausted {
        what: String,
    },
    SessionFinished {
        best: Option<CandidateId>,
        reason: String,
    },
}

impl Event {
    /// Transient events go to live subscribers only.
    pub fn is_transient(&self) -> bool {
        matches!(self, Event::LlmDelta { .. } | Event::EvalPhase { .. })
    }
}

/// What a front end asks of the engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    /// Answer an open gate.
    Resolve {
        gate: GateId,
        decision: Decision,
    },
    /// Repair a candidate with an instruction (empty: the usual repair prompt).
    Repair {
        candidate: CandidateId,
        instruction: String,
    },
    /// Optimize a candidate with an instruction.
    Optimize {
        candidate: CandidateId,
        instruction: String,
    },
    /// Evaluate this code as a new manual candidate.
    Manual {
        parent: Option<CandidateId>,
        code: String,
    },
    Reevaluate {
        candidate: CandidateId,
    },
    Profile {
        candidate: CandidateId,
    },
    /// Make this candidate the final answer.
    MarkFinal {
        candidate: CandidateId,
    },
    Pause,
    Resume,
    /// Cancel the LLM call in flight (all calls when `None`).
    CancelCall {
        call: Option<CallId>,
    },
    SetMode {
        mode: Mode,
    },
    /// The answer to a call of the `manual` provider.
    ManualAnswer {
        call: CallId,
        text: String,
    },
    /// End the run cleanly (the session stays resumable).
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_flat_json_lines() {
        let record = EventRecord {
            seq: 7,
            ts: DateTime::parse_from_rfc3339("2026-11-21T08:00:00Z")
                .unwrap()
                .with_timezone(&Utc),
            event: Event::CandidateCreated {
                id: 3,
                key: "seed1/repair2".into(),
                parent: Some(1),
                kind: CandidateKind::Repair { attempt: 2 },
                file: "kernels/3-repair.py".into(),
                call: Some(4),
            },
        };
        let line = serde_json::to_string(&record).unwrap();
        assert_eq!(
            line,
            r#"{"seq":7,"ts":"2026-11-21T08:00:00Z","type":"candidate_created","id":3,"key":"seed1/repair2","parent":1,"kind":"repair","attempt":2,"file":"kernels/3-repair.py","call":4}"#
        );
        assert_eq!(serde_json::from_str::<EventRecord>(&line).unwrap(), record);
    }

    #[test]
    fn commands_round_trip() {
        for c in [
            Command::Resolve {
                gate: 1,
                decision: Decision::Rewrite { text: "x".into() },
            },
            Command::Repair {
                candidate: 2,
                instruction: "use BLOCK=256".into(),
            },
            Command::Stop,
        ] {
            let s = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<Command>(&s).unwrap(), c);
        }
        assert_eq!(
            serde_json::to_string(&Command::Pause).unwrap(),
            r#"{"command":"pause"}"#
        );
    }

    #[test]
    fn transient_events_are_marked() {
        assert!(
            Event::LlmDelta {
                call: 1,
                text: "a".into(),
                reasoning: String::new()
            }
            .is_transient()
        );
        assert!(
            !Event::StateChanged {
                state: EngineState::Running
            }
            .is_transient()
        );
    }
}
