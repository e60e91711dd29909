//! What a front end asks of the engine, and a person's answer at a gate.

use serde::{Deserialize, Serialize};

use super::{CallId, CandidateId, Decision, GateId, GateKind, Mode};

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
    /// Approve every gate of this kind from now on, for the rest of the session (gates of
    /// it already waiting too).
    ApproveAlways {
        kind: GateKind,
    },
    /// Take back standing approvals (`approve_always`): of this kind, or every one when
    /// `kind` is absent. Approves nothing: gates of those kinds are asked again wherever
    /// the mode asks them.
    RevokeApprovals {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kind: Option<GateKind>,
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

impl Command {
    /// What the command asks, in words, for the console and status messages.
    pub fn describe(&self) -> String {
        let instruction = |text: &str| {
            let text = text.trim();
            if text.is_empty() {
                String::new()
            } else {
                let short: String = text.chars().take(60).collect();
                let more = if text.chars().count() > 60 { "…" } else { "" };
                format!(": \"{short}{more}\"")
            }
        };
        match self {
            Command::Resolve { gate, decision } => format!("{} at gate {gate}", decision.word()),
            Command::Repair {
                candidate,
                instruction: i,
            } => format!("repair candidate {candidate}{}", instruction(i)),
            Command::Optimize {
                candidate,
                instruction: i,
            } => format!("optimize candidate {candidate}{}", instruction(i)),
            Command::Manual { parent, code } => format!(
                "evaluate your code ({} lines){}",
                code.lines().count(),
                parent
                    .map(|p| format!(" as a child of candidate {p}"))
                    .unwrap_or_default()
            ),
            Command::Reevaluate { candidate } => format!("evaluate candidate {candidate} again"),
            Command::Profile { candidate } => format!("profile candidate {candidate}"),
            Command::MarkFinal { candidate } => format!("mark candidate {candidate} final"),
            Command::Pause => "pause".into(),
            Command::Resume => "resume".into(),
            Command::CancelCall { call: Some(call) } => format!("cancel call {call}"),
            Command::CancelCall { call: None } => "cancel every call in flight".into(),
            Command::SetMode { mode } => format!("switch to {} mode", mode.word()),
            Command::ApproveAlways { kind } => {
                format!("approve all {} from now on", kind.plural())
            }
            Command::RevokeApprovals { kind: Some(kind) } => {
                format!("take back the approval of all {}", kind.plural())
            }
            Command::RevokeApprovals { kind: None } => "take back every standing approval".into(),
            Command::ManualAnswer { call, .. } => format!("answer call {call}"),
            Command::Reask { call } => format!("ask call {call} again"),
            Command::Stop => "stop the run".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CandidateId, GateId};

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
        // What a second window writes to control.jsonl to steer the run.
        assert_eq!(
            serde_json::from_str::<Command>(r#"{"command":"set_mode","mode":"review"}"#).unwrap(),
            Command::SetMode {
                mode: crate::protocol::Mode::Review
            }
        );
        assert_eq!(
            serde_json::from_str::<Command>(r#"{"command":"approve_always","kind":"llm_call"}"#)
                .unwrap(),
            Command::ApproveAlways {
                kind: GateKind::LlmCall
            }
        );
        // Taking approvals back, one kind or all of them.
        assert_eq!(
            serde_json::from_str::<Command>(
                r#"{"command":"revoke_approvals","kind":"evaluation"}"#
            )
            .unwrap(),
            Command::RevokeApprovals {
                kind: Some(GateKind::Evaluation)
            }
        );
        assert_eq!(
            serde_json::to_string(&Command::RevokeApprovals { kind: None }).unwrap(),
            r#"{"command":"revoke_approvals"}"#
        );
        assert_eq!(
            serde_json::from_str::<Command>(r#"{"command":"revoke_approvals"}"#).unwrap(),
            Command::RevokeApprovals { kind: None }
        );
    }

    #[test]
    fn commands_are_described_in_words_never_as_debug_output() {
        let manual = Command::Manual {
            parent: Some(CandidateId(2)),
            code: "import torch\nclass ModelNew: pass\n".into(),
        };
        assert_eq!(
            manual.describe(),
            "evaluate your code (2 lines) as a child of candidate 2"
        );
        let rewrite = Command::Resolve {
            gate: GateId(7),
            decision: Decision::Rewrite {
                text: "a long prompt".into(),
            },
        };
        assert_eq!(rewrite.describe(), "rewrite at gate 7");
        let repair = Command::Repair {
            candidate: CandidateId(3),
            instruction: "x".repeat(80),
        };
        assert!(repair.describe().ends_with("…\""), "{}", repair.describe());
        for c in [manual, rewrite, repair, Command::Stop] {
            let text = c.describe();
            assert!(!text.contains('{') && !text.contains("Some("), "{text}");
        }
    }
}
