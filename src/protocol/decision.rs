//! The person's answer to a gate: approve, reject, or rewrite with their own text. A
//! command carries it to the engine and an event records it.

use serde::{Deserialize, Serialize};

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

impl Decision {
    /// `approve`, `reject` or `rewrite`.
    pub fn word(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject => "reject",
            Decision::Rewrite { .. } => "rewrite",
        }
    }
}
