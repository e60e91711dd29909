//! The one event type between the engine and anything that shows or reads it (headless
//! console, TUI, another process attached to a session, the report).
//!
//! Events are self-contained: each line of `events.jsonl` is one `EventRecord`, and the
//! whole session state is a fold over them (`session::state`). Transient events (live
//! LLM text, evaluation phases) go to live subscribers only; what they carry is also
//! written to files (`llm/<call>.response.md` grows as the answer streams).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{
    Analysis, CallId, CallKind, CandidateId, CandidateKind, Category, Decision, GateId,
    PrecisionPolicy,
};

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

impl Mode {
    /// `auto`, `review` or `step`.
    pub fn word(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Review => "review",
            Mode::Step => "step",
        }
    }

    /// Whether a run in this mode stops at gates of `kind`: step mode at every gate,
    /// review mode before algorithm optimization, the stages and the final best, auto
    /// mode nowhere.
    pub fn asks(self, kind: GateKind) -> bool {
        match self {
            Mode::Step => true,
            Mode::Review => !matches!(kind, GateKind::LlmCall | GateKind::Evaluation),
            Mode::Auto => false,
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
    /// `starting`, `running`, `paused`, `waiting`, `finished`, `failed`, `stopped`.
    pub fn word(&self) -> &'static str {
        match self {
            EngineState::Starting => "starting",
            EngineState::Running => "running",
            EngineState::Paused => "paused",
            EngineState::Waiting => "waiting",
            EngineState::Finished => "finished",
            EngineState::Failed => "failed",
            EngineState::Stopped => "stopped",
        }
    }

    pub fn is_over(&self) -> bool {
        matches!(
            self,
            EngineState::Finished | EngineState::Failed | EngineState::Stopped
        )
    }
}

/// What a tuning stage's kernel did to its base (regression protection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageVerdict {
    /// Correct and better (or `accept = "any"`): it became the new base.
    Replaced,
    /// Correct, measured and not better: the base stays.
    Kept,
    /// Correct, but nothing measured to compare (the CPU, a failed timing): the base stays.
    NotCompared,
    /// Not correct: the base stays.
    NotCorrect,
    /// The stage produced no kernel.
    NoKernel,
}

impl StageVerdict {
    pub fn replaced(self) -> bool {
        self == StageVerdict::Replaced
    }

    /// The verdict of a record from before it was kept, from what it does say: whether
    /// the stage's kernel replaced the base, and whether there was a kernel at all.
    pub fn from_record(accepted: bool, has_kernel: bool) -> StageVerdict {
        match (accepted, has_kernel) {
            (true, _) => StageVerdict::Replaced,
            (false, false) => StageVerdict::NoKernel,
            (false, true) => StageVerdict::Kept,
        }
    }

    /// In words, for reports.
    pub fn word(self) -> &'static str {
        match self {
            StageVerdict::Replaced => "accepted",
            StageVerdict::Kept => "not accepted",
            StageVerdict::NotCompared => "not compared",
            StageVerdict::NotCorrect => "not correct",
            // The report names the missing kernel already ("-> no kernel, the base stays").
            StageVerdict::NoKernel => "the base stays",
        }
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

impl GateKind {
    /// Every kind, in the order a run meets them.
    pub const ALL: [GateKind; 5] = [
        GateKind::LlmCall,
        GateKind::Evaluation,
        GateKind::AlgorithmOptimization,
        GateKind::Stages,
        GateKind::FinalBest,
    ];

    /// Where the run stopped, as the gate dialog and the batch console say it.
    pub fn describe(self) -> &'static str {
        match self {
            GateKind::LlmCall => "before an LLM call",
            GateKind::Evaluation => "before an evaluation",
            GateKind::AlgorithmOptimization => "before algorithm optimization",
            GateKind::Stages => "before the tuning stages",
            GateKind::FinalBest => "before declaring the final best",
        }
    }

    /// The gates of this kind, plural, as a standing approval names them ("every LLM call").
    pub fn plural(self) -> &'static str {
        match self {
            GateKind::LlmCall => "LLM calls",
            GateKind::Evaluation => "evaluations",
            GateKind::AlgorithmOptimization => "algorithm optimization steps",
            GateKind::Stages => "tuning stage runs",
            GateKind::FinalBest => "final best declarations",
        }
    }

    /// Whether a rewrite means something at such a gate: only a prompt before it is sent
    /// and a kernel before it is evaluated (`has_file`: the gate shows one) can be rewritten.
    pub fn takes_rewrite(self, has_file: bool) -> bool {
        has_file && matches!(self, GateKind::LlmCall | GateKind::Evaluation)
    }
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

/// The error of a call that was in flight when its process died, as the resumed run
/// closes it: the provider may have answered (and billed) it.
pub const CALL_INTERRUPTED: &str = "interrupted: the run stopped before the answer was saved";

/// The part of an evaluation result that views need without opening `eval/<id>.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EvalSummary {
    pub correct: bool,
    /// Failure category, `None` when correct.
    pub category: Option<Category>,
    pub summary: String,
    /// Speedup over the reference; `None` without meaningful timing (CPU) or on failure.
    pub score: Option<f64>,
    /// The score's 95% interval; `None` where `score` is, and in sessions recorded before
    /// the judge timed both sides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_high: Option<f64>,
    /// The timing stayed noisy: a median's interval wider than +-5%.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub noisy: bool,
    pub kernel_ms: Option<f64>,
    pub reference_ms: Option<f64>,
    pub flags: Vec<String>,
    pub warnings: Vec<String>,
    /// The device it ran on (`cuda:1`), when the session spreads evaluations over several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The score against each baseline, where the reference was timed under
    /// `torch.compile` too (`score` is the one `baseline` names); absent otherwise and in
    /// sessions from before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baselines: Option<Box<BaselineScores>>,
    /// The kernel's % of the speed of light (GPU; `speed_of_light.kernel_pct`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sol_pct: Option<f64>,
    /// The score against the reference under PyTorch's default precision settings, where
    /// the policy's differ for the task's work (shown beside the headline, which fast_p and
    /// selection use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_defaults: Option<Box<DefaultsScore>>,
}

/// A score against the reference under PyTorch's default settings (`timing.defaults`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DefaultsScore {
    pub score: ScoreFigure,
    /// How much faster the reference runs under the defaults than under the policy.
    pub reference_speedup: Option<f64>,
    /// What differs, in words (`float32 convolutions: TF32 cuDNN convolutions off ...`).
    pub differs: Option<String>,
}

impl DefaultsScore {
    /// `0.43x [0.42-0.44] vs PyTorch's defaults (the reference runs 2.41x as fast under
    /// them)`.
    pub fn text(&self) -> String {
        let speed = self
            .reference_speedup
            .map(|r| format!(" (the reference runs {r:.2}x as fast under them)"))
            .unwrap_or_default();
        format!("{} vs PyTorch's defaults{speed}", self.score.text())
    }
}

/// A score against each baseline, and which one the headline is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineScores {
    pub headline: crate::protocol::Baseline,
    pub vs_eager: ScoreFigure,
    pub vs_compile: ScoreFigure,
    /// The compiled reference's speedup over eager.
    pub compile_speedup: Option<f64>,
}

impl BaselineScores {
    /// The score against `baseline`.
    pub fn against(&self, baseline: crate::protocol::Baseline) -> &ScoreFigure {
        match baseline {
            crate::protocol::Baseline::Eager => &self.vs_eager,
            crate::protocol::Baseline::Compile => &self.vs_compile,
        }
    }
}

/// A score with its 95% interval, when known.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ScoreFigure {
    pub score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
}

impl ScoreFigure {
    pub fn new(score: Option<f64>, interval: Option<(f64, f64)>) -> ScoreFigure {
        ScoreFigure {
            score,
            low: interval.map(|i| i.0),
            high: interval.map(|i| i.1),
        }
    }

    pub fn interval(&self) -> Option<(f64, f64)> {
        Some((self.low?, self.high?))
    }

    /// `1.45x [1.43-1.47]`, `1.45x`, or `-`.
    pub fn text(&self) -> String {
        crate::protocol::figures::score_text(self.score, self.interval())
    }
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
        /// The precision policy of its evaluations (absent in sessions from before it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precision: Option<PrecisionPolicy>,
    },
    /// A previous run of this session is being continued.
    SessionResumed {
        previous_seq: u64,
    },
    StateChanged {
        state: EngineState,
    },
    /// The person switched the session's mode (from the TUI, a second window or an
    /// explicit `kforge resume --mode`). Recorded before it takes effect: gates waiting
    /// that the new mode does not ask are approved at once, and a resumed run goes on in
    /// the latest mode of the log. A switch to step mode also ends every standing approval.
    ModeChanged {
        mode: Mode,
    },
    /// The person approved every gate of `kind` for the rest of the session ("always",
    /// `Y` in the gate dialog). Recorded before it takes effect: gates of that kind
    /// already waiting are approved, later ones are not asked; a resumed run keeps it,
    /// until it is taken back (`StandingApprovalRevoked`) or a switch to step mode ends it.
    StandingApproval {
        kind: GateKind,
    },
    /// The person took back standing approvals: of `kind`, or every one when it is absent
    /// (`revoke_approvals`). Recorded before it takes effect; it approves nothing, and gates
    /// of those kinds are asked again wherever the mode asks them (a resumed run too).
    StandingApprovalRevoked {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<GateKind>,
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
    /// An evaluation an earlier run left unfinished (it stopped mid-evaluation), closed
    /// by the resumed run: the candidate goes back to its last result, or to pending when
    /// it had none (and is evaluated again).
    EvalInterrupted {
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
    /// The algorithm analysis of a candidate (normalized keys; `raw` as the LLM gave it).
    AnalysisReady {
        candidate: CandidateId,
        call: CallId,
        analysis: Analysis,
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
        /// Why, as a category (absent in sessions written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verdict: Option<StageVerdict>,
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
    /// The gate closed without an answer (the run stopped); a resumed run asks it again.
    GateWithdrawn {
        gate: GateId,
        reason: String,
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
    /// An LLM call failed before its first token and is tried again after `delay_s`
    /// (the client's own retries with backoff).
    LlmRetry {
        call: CallId,
        /// The attempt about to start (2 for the first retry).
        attempt: u32,
        delay_s: f64,
        /// Why the previous attempt failed.
        reason: String,
    },
    /// The person made this candidate the final answer: it stays the session's best through
    /// re-evaluations, resume and the report.
    FinalMarked {
        candidate: CandidateId,
    },
    /// The re-check of a candidate on unseen shapes and seeds began (it can take minutes:
    /// views say so while it runs). It ends with `ShapesChecked`, or `ShapesCheckNotRun`.
    ShapesCheckStarted {
        candidate: CandidateId,
    },
    /// The re-check could not be run (an evaluator error): nothing is recorded for the
    /// candidate, and a resumed run checks it again.
    ShapesCheckNotRun {
        candidate: CandidateId,
        reason: String,
    },
    /// A correct candidate was re-checked on unseen shapes and seeds (the best before the
    /// final-best gate, a kernel marked final): `shapes/<id>.json` holds the whole check.
    ShapesChecked {
        candidate: CandidateId,
        /// `shapes/<id>.json`.
        result_file: String,
        #[serde(flatten)]
        verdict: super::shapes::ShapeVerdict,
        /// `correct on 5 of 5 unseen shapes`, or the shape that fails and how.
        line: String,
    },
    SessionFinished {
        best: Option<CandidateId>,
        reason: String,
        /// How the run ended (absent in sessions written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        end: Option<RunEnd>,
    },
}

/// How a run ended. Each has its own exit code (`kforge run --help`, README's exit codes): a run
/// that produced nothing never ends like one that succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// Every step ran and a correct kernel was found.
    Complete,
    /// Stopped by the person (the session is resumable).
    Stopped,
    /// A token, cost or wall-time budget was reached (resumable).
    BudgetReached,
    /// Every LLM call failed: the provider never answered (resumable once it is back).
    NoAnswer,
    /// The LLM answered but no candidate was ever evaluated (answers without code,
    /// candidates dropped at gates).
    NothingEvaluated,
    /// Candidates were evaluated and none was correct.
    NoCorrectKernel,
    /// The run could not go on: the provider refuses it, the evaluator broke, the disk is
    /// full. Resumable once the cause is fixed.
    Failed,
}

impl RunEnd {
    /// As `events.jsonl` writes it: `complete`, `no_correct_kernel`...
    pub fn word(self) -> &'static str {
        match self {
            RunEnd::Complete => "complete",
            RunEnd::Stopped => "stopped",
            RunEnd::BudgetReached => "budget_reached",
            RunEnd::NoAnswer => "no_answer",
            RunEnd::NothingEvaluated => "nothing_evaluated",
            RunEnd::NoCorrectKernel => "no_correct_kernel",
            RunEnd::Failed => "failed",
        }
    }

    /// The process exit code of `kforge run` / `kforge resume`.
    pub fn exit_code(self) -> u8 {
        match self {
            RunEnd::Complete | RunEnd::Stopped | RunEnd::BudgetReached => 0,
            RunEnd::Failed => 1,
            RunEnd::NoAnswer | RunEnd::NothingEvaluated => 3,
            RunEnd::NoCorrectKernel => 4,
        }
    }

    /// The engine state a run ending this way is left in. Only a complete run, or one that
    /// judged kernels and found none correct, is `Finished`; the others can be resumed.
    pub fn state(self) -> EngineState {
        match self {
            RunEnd::Complete | RunEnd::NoCorrectKernel => EngineState::Finished,
            RunEnd::Stopped | RunEnd::BudgetReached => EngineState::Stopped,
            RunEnd::NoAnswer | RunEnd::NothingEvaluated | RunEnd::Failed => EngineState::Failed,
        }
    }
}

impl Event {
    /// Transient events go to live subscribers only.
    pub fn is_transient(&self) -> bool {
        matches!(self, Event::LlmDelta { .. } | Event::EvalPhase { .. })
    }
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
                id: CandidateId(3),
                key: "seed1/repair2".into(),
                parent: Some(CandidateId(1)),
                kind: CandidateKind::Repair { attempt: 2 },
                file: "kernels/3-repair.py".into(),
                call: Some(CallId(4)),
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
    fn transient_events_are_marked() {
        assert!(
            Event::LlmDelta {
                call: CallId(1),
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
