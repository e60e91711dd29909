//! The vocabulary shared by the engine, the session store and fold, the TUI and the
//! report (docs/architecture.md, Shared vocabulary): events, commands, ids, failure categories, analyses,
//! candidate kinds and precision policies. Everything here is plain data with its `events.jsonl` form; nothing
//! here depends on the engine, the terminal, HTTP or Python.

mod analysis;
mod baseline;
mod candidate;
mod category;
mod commands;
mod decision;
mod eval_result;
mod events;
pub mod figures;
mod ids;
pub mod manual;
mod precision;
pub mod shapes;
pub mod sol;
mod step_key;
mod template_name;
pub mod timing_text;

pub use analysis::Analysis;
pub use baseline::{
    Baseline, BaselineChoice, CompileAfterVerdict, CompileDeferral, CompileMode, CompileSource,
};
pub use candidate::{
    CallAnswer, CallKind, CallKindInfo, CallTemplate, CandidateKind, CandidateKindInfo, ReportGroup,
};
pub use category::Category;
pub use commands::Command;
pub use decision::Decision;
pub use eval_result::{
    Alignment, Audit, Calibration, CompileFigures, DefaultsFigures, DeviceInfo, EvalResult,
    Finding, Footprint, KernelBenchTiming, LaunchDraws, LaunchPath, LaunchPathProcesses,
    MathFinding, ORACLE_FACTOR_FLOAT32, ORACLE_FACTOR_HALF, OracleUsed, OutputCheck,
    OutputTolerance, PrecisionRecord, ProtocolRound, RoundOrder, SandboxInfo, StaticReport, Status,
    TaskSandbox, Timing, TimingEnvironment, TimingStats, ToleranceUsed, TorchPrecision, Trial,
    Versions, ratio_text,
};
pub use events::{
    BaselineScores, CALL_INTERRUPTED, DefaultsScore, EngineState, EvalSummary, Event, EventRecord,
    GateKind, LogLevel, Mode, RunEnd, ScoreFigure, StageVerdict, TokenUsage,
};
pub use ids::{CallId, CandidateId, GateId, IdCounter, TaskKey};
pub use precision::{MathKind, PrecisionPolicy};
pub use step_key::{GateKey, StepKey, UnknownKey};
pub use template_name::TemplateName;
