//! What produced a candidate and what an LLM call is for, each with one descriptor
//! (`descriptor()`): what the kind is called, which prompt template a call is rendered
//! from, and where the report counts a candidate. Every per-kind fact lives in one `match`
//! here, so a new kind does not compile until it says each of them (docs/architecture.md,
//! Add a pipeline step).

use serde::{Deserialize, Serialize};

use super::{CallId, TemplateName};

/// What produced a candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CandidateKind {
    /// One of the N independent first generations; `direction` names the strategy its
    /// prompt asked for (`row-per-program`; absent in sessions from before seeds had one).
    Seed {
        index: u32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        direction: Option<String>,
    },
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

    /// The label every view shows: `seed 1 (row-per-program)`, `repair 2`, `algorithm`,
    /// `stage 2 block_tiling`, `manual`, `instructed`.
    pub fn label(&self) -> String {
        match self {
            CandidateKind::Seed {
                index,
                direction: Some(d),
            } => format!("seed {index} ({d})"),
            CandidateKind::Seed { index, .. } => format!("seed {index}"),
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
            CandidateKind::Seed { index, .. } => format!("seed {index}"),
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

/// Where a call's prompt template comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallTemplate {
    /// That template (`prompts/<name>.j2`).
    Named(TemplateName),
    /// The template of the call's tuning stage (`prompts/stage_<stage>.j2`).
    OfStage,
}

/// What a call's answer is taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallAnswer {
    /// A kernel: it becomes a candidate (the tree shows it as being written meanwhile).
    Kernel,
    /// An analysis of a candidate (`AnalysisReady`), no kernel.
    Analysis,
}

/// What a call kind is: its word, its template and what its answer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallKindInfo {
    /// Short word for tags, logs, the views and the report's usage table (`seed`,
    /// `optimize`...); also its `events.jsonl` form.
    pub word: &'static str,
    pub template: CallTemplate,
    pub answer: CallAnswer,
}

/// The line of the report's contributions that counts a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportGroup {
    /// "Seeds": first generations, as written.
    Seeds,
    /// "Repairs": attempts, and the failing kernels they fixed.
    Repairs,
    /// "Algorithm optimization": before and after, per optimized kernel.
    AlgorithmOptimization,
    /// "Stages": told from the stage records, with their verdicts.
    Stages,
    /// "Manual and instructed": the person's own candidates.
    PersonsOwn,
    /// Not counted on a line of its own (a re-asked call's kernel).
    Uncounted,
}

impl ReportGroup {
    /// Every group, in the order of the report's contributions.
    pub const ALL: [ReportGroup; 6] = [
        ReportGroup::Seeds,
        ReportGroup::Repairs,
        ReportGroup::AlgorithmOptimization,
        ReportGroup::Stages,
        ReportGroup::PersonsOwn,
        ReportGroup::Uncounted,
    ];
}

/// What a candidate kind is: its word and where the report counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CandidateKindInfo {
    /// Short word for tags and file names (`kernels/<id>-<word>.py`), and the report's
    /// `kind`.
    pub word: &'static str,
    pub report: ReportGroup,
}

impl CallKind {
    /// Every kind, in pipeline order, for the tests that go through each.
    #[cfg(test)]
    pub(crate) const ALL: [CallKind; 6] = [
        CallKind::Seed,
        CallKind::Repair,
        CallKind::Analysis,
        CallKind::Optimize,
        CallKind::Stage,
        CallKind::Instructed,
    ];

    /// Everything said about the kind: adding a kind starts here.
    pub const fn descriptor(self) -> CallKindInfo {
        let (word, template) = match self {
            CallKind::Seed => ("seed", CallTemplate::Named(TemplateName::Seed)),
            CallKind::Repair => ("repair", CallTemplate::Named(TemplateName::Repair)),
            CallKind::Analysis => ("analysis", CallTemplate::Named(TemplateName::Analysis)),
            CallKind::Optimize => (
                "optimize",
                CallTemplate::Named(TemplateName::OptimizeFromAnalysis),
            ),
            CallKind::Stage => ("stage", CallTemplate::OfStage),
            CallKind::Instructed => ("instructed", CallTemplate::Named(TemplateName::Instructed)),
        };
        let answer = match self {
            CallKind::Analysis => CallAnswer::Analysis,
            _ => CallAnswer::Kernel,
        };
        CallKindInfo {
            word,
            template,
            answer,
        }
    }
}

impl CandidateKind {
    /// Everything said about the kind: adding a kind starts here.
    pub const fn descriptor(&self) -> CandidateKindInfo {
        let (word, report) = match self {
            CandidateKind::Seed { .. } => ("seed", ReportGroup::Seeds),
            CandidateKind::Repair { .. } => ("repair", ReportGroup::Repairs),
            CandidateKind::Algorithm => ("algorithm", ReportGroup::AlgorithmOptimization),
            CandidateKind::Stage { .. } => ("stage", ReportGroup::Stages),
            CandidateKind::Manual => ("manual", ReportGroup::PersonsOwn),
            CandidateKind::Instructed { .. } => ("instructed", ReportGroup::PersonsOwn),
            CandidateKind::Reasked { .. } => ("reasked", ReportGroup::Uncounted),
        };
        CandidateKindInfo { word, report }
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
        let seed = CandidateKind::Seed {
            index: 2,
            direction: Some("online-tiled".into()),
        };
        assert_eq!(seed.label(), "seed 2 (online-tiled)");
        assert_eq!(seed.short_label(), "seed 2");
        assert_eq!(
            CandidateKind::Instructed {
                instruction: "x".into()
            }
            .label(),
            "instructed"
        );
    }

    /// `ALL` holds each group once, in declaration order, `Uncounted` (declared last) last.
    #[test]
    fn every_report_group_is_listed_once_in_order() {
        for (i, group) in ReportGroup::ALL.into_iter().enumerate() {
            assert_eq!(group as usize, i, "{group:?}");
        }
        assert_eq!(ReportGroup::ALL.last(), Some(&ReportGroup::Uncounted));
    }

    /// The words are the kinds' `events.jsonl` form: each must be what serde writes.
    #[test]
    fn a_kind_word_is_its_serialized_form() {
        for kind in CallKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json.as_str(), Some(kind.descriptor().word));
        }
        for kind in [
            CandidateKind::Seed {
                index: 1,
                direction: None,
            },
            CandidateKind::Repair { attempt: 1 },
            CandidateKind::Algorithm,
            CandidateKind::Stage {
                name: "block_tiling".into(),
                index: 1,
            },
            CandidateKind::Manual,
            CandidateKind::Instructed {
                instruction: "x".into(),
            },
            CandidateKind::Reasked { call: CallId(2) },
        ] {
            let json = serde_json::to_value(&kind).unwrap();
            assert_eq!(json["kind"].as_str(), Some(kind.descriptor().word));
        }
    }
}
