//! What a front end asks of the engine, and a person's answer at a gate.

use serde::{Deserialize, Serialize};

use super::{CallId, CandidateId, GateId, Mode};

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
    /// Send a failed LLM call's prompt again; what it writes becomes a new candidate (or,
    /// for an analysis, the candidate's analysis).
    Reask {
        call: CallId,
    },
    /// End the run cleanly (the session stays resumable).
    Stop,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip() {
        for c in [
            Command::Resolve {
                gate: GateId(1),
                decision: Decision::Rewrite { text: "x".into() },
            },
            Command::Repair {
                candidate: CandidateId(2),
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
}
