//! What produced a candidate and what an LLM call is for, each with its one label.

use serde::{Deserialize, Serialize};

use super::CallId;

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
    /// Written by the prompt of a failed call, sent again at the person's request.
    Reasked { call: CallId },
}

impl CandidateKind {
    /// Short word for tags and file names: `seed`, `repair`, `algorithm`, `stage`, ...
    /// (its descriptor's).
    pub fn word(&self) -> &'static str {
        self.descriptor().word
    }

    /// The label every view shows: `seed 1`, `repair 2`, `algorithm`,
    /// `stage 2 block_tiling`, `manual`, `instructed`.
    pub fn label(&self) -> String {
        match self {
            CandidateKind::Seed { index } => format!("seed {index}"),
            CandidateKind::Repair { attempt } => format!("repair {attempt}"),
            CandidateKind::Stage { name, index } => format!("stage {index} {name}"),
            CandidateKind::Reasked { call } => format!("call {call} asked again"),
            other => other.word().to_string(),
        }
    }

    /// The label where room is short (the tree): a stage by the first word of its name
    /// (`stage 1 grid`).
    pub fn short_label(&self) -> String {
        match self {
            CandidateKind::Stage { name, index } => {
                format!("stage {index} {}", name.split('_').next().unwrap_or(name))
            }
            other => other.label(),
        }
    }
}

/// What an LLM call is for (its template and word: `CallKind::descriptor`). Declared in
/// pipeline order, the order of the report's usage table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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
    /// Short word for tags and logs (its descriptor's).
    pub fn word(&self) -> &'static str {
        self.descriptor().word
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_label_per_kind() {
        let stage = CandidateKind::Stage {
            name: "block_tiling".into(),
            index: 2,
        };
        assert_eq!(stage.label(), "stage 2 block_tiling");
        assert_eq!(stage.short_label(), "stage 2 block");
        assert_eq!(CandidateKind::Repair { attempt: 3 }.label(), "repair 3");
        assert_eq!(
            CandidateKind::Instructed {
                instruction: "x".into()
            }
            .label(),
            "instructed"
        );
    }
}
