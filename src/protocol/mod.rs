//! The vocabulary shared by the engine, the session store and fold, the TUI and the
//! report (docs/architecture.md, Shared vocabulary): events, commands, ids, failure categories, analyses,
//! candidate kinds and precision policies. Everything here is plain data with its `events.jsonl` form; nothing
//! here depends on the engine, the terminal, HTTP or Python.

mod analysis;
mod baseline;
mod candidate;
mod category;
mod commands;
mod events;
mod ids;
mod precision;
pub mod shapes;
mod step_key;

pub use analysis::Analysis;
pub use baseline::{Baseline, BaselineChoice, CompileMode};
pub use candidate::{
    CallKind, CallKindInfo, CallTemplate, CandidateKind, CandidateKindInfo, ReportGroup,
};
pub use category::Category;
pub use commands::{Command, Decision};
pub use events::{
    BaselineScores, CALL_INTERRUPTED, EngineState, EvalSummary, Event, EventRecord, GateKind,
    LogLevel, Mode, RunEnd, ScoreFigure, StageVerdict, TokenUsage,
};
pub use ids::{CallId, CandidateId, GateId, IdCounter, TaskKey};
pub use precision::{MathKind, PrecisionPolicy};
pub use step_key::{GateKey, StepKey, UnknownKey};
