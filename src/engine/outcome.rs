//! What a pipeline step returns, and how a run's end is decided from what happened.

use crate::protocol::RunEnd;

/// The outcome of one step of the pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum Step<T> {
    Done(T),
    /// The step chose not to run or gave nothing, and the pipeline goes on (a gate
    /// rejected it, the analysis said "not worth optimizing").
    Skipped(String),
    /// The run is stopping (the person, a budget, a fatal error): wind down.
    Stopped,
    /// The step could not do its work (the LLM failed even when asked again, an answer
    /// without code twice); the pipeline goes on with the other steps.
    Failed(String),
}

impl<T> Step<T> {
    /// The same outcome for a step of another type; `Done` is not passed on this way.
    pub fn forward<U>(self) -> Step<U> {
        match self {
            Step::Done(_) => unreachable!("forward() is for outcomes other than Done"),
            Step::Skipped(r) => Step::Skipped(r),
            Step::Stopped => Step::Stopped,
            Step::Failed(e) => Step::Failed(e),
        }
    }

    /// `Done(())` for any `Done`; other outcomes unchanged.
    pub fn forward_unit(self) -> Step<()> {
        match self {
            Step::Done(_) => Step::Done(()),
            other => other.forward(),
        }
    }
}

/// `let x = step!(expr);`: the value of a `Done`, or return any other outcome at once.
macro_rules! step {
    ($e:expr) => {
        match $e {
            $crate::engine::outcome::Step::Done(v) => v,
            other => return other.forward(),
        }
    };
}
pub(crate) use step;

/// What the end of a run is decided from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndFacts {
    /// A failure that ended the run (the provider refuses it, the evaluator broke, the
    /// disk is full).
    pub fatal: Option<String>,
    /// Whether the run was told to stop (the person, Ctrl-C, a budget).
    pub stopped: bool,
    pub budget: Option<String>,
    pub calls_answered: usize,
    pub calls_failed: usize,
    pub last_call_error: Option<String>,
    pub evaluated: usize,
    pub has_best: bool,
}

/// How the run ended and why, in one line.
pub fn decide_end(f: &EndFacts) -> (RunEnd, String) {
    if let Some(fatal) = &f.fatal {
        return (RunEnd::Failed, fatal.clone());
    }
    if f.stopped {
        return match &f.budget {
            Some(b) => (RunEnd::BudgetReached, format!("budget reached: {b}")),
            None => (RunEnd::Stopped, "stopped".into()),
        };
    }
    if f.calls_answered == 0 && f.calls_failed > 0 {
        return (
            RunEnd::NoAnswer,
            format!(
                "every LLM call failed ({} call{}); the last: {}",
                f.calls_failed,
                if f.calls_failed == 1 { "" } else { "s" },
                f.last_call_error.as_deref().unwrap_or("no error given")
            ),
        );
    }
    if f.evaluated == 0 {
        return (
            RunEnd::NothingEvaluated,
            "no candidate was evaluated: no answer gave a kernel to evaluate".into(),
        );
    }
    if !f.has_best {
        return (
            RunEnd::NoCorrectKernel,
            format!(
                "no correct kernel among {} evaluated candidate{}",
                f.evaluated,
                if f.evaluated == 1 { "" } else { "s" }
            ),
        );
    }
    (RunEnd::Complete, "pipeline complete".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_produced_nothing_never_ends_complete() {
        let down = EndFacts {
            calls_failed: 6,
            last_call_error: Some("HTTP 503".into()),
            ..Default::default()
        };
        let (end, reason) = decide_end(&down);
        assert_eq!(end, RunEnd::NoAnswer);
        assert!(
            reason.contains("HTTP 503") && reason.contains("6"),
            "{reason}"
        );
        assert_ne!(end.exit_code(), 0);

        let no_code = EndFacts {
            calls_answered: 4,
            ..Default::default()
        };
        assert_eq!(decide_end(&no_code).0, RunEnd::NothingEvaluated);
        assert_ne!(RunEnd::NothingEvaluated.exit_code(), 0);

        let all_wrong = EndFacts {
            calls_answered: 4,
            evaluated: 3,
            ..Default::default()
        };
        assert_eq!(decide_end(&all_wrong).0, RunEnd::NoCorrectKernel);
        assert_ne!(RunEnd::NoCorrectKernel.exit_code(), 0);

        let good = EndFacts {
            evaluated: 3,
            calls_answered: 4,
            has_best: true,
            ..Default::default()
        };
        assert_eq!(
            decide_end(&good),
            (RunEnd::Complete, "pipeline complete".into())
        );
        assert_eq!(RunEnd::Complete.exit_code(), 0);

        let fatal = EndFacts {
            fatal: Some("No space left on device".into()),
            ..good.clone()
        };
        assert_eq!(decide_end(&fatal).0, RunEnd::Failed);
        let budget = EndFacts {
            stopped: true,
            budget: Some("2400 tokens of 2000".into()),
            ..good
        };
        assert_eq!(decide_end(&budget).0, RunEnd::BudgetReached);
    }
}
