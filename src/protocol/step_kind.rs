//! One descriptor per kind of step: what a call kind and a candidate kind are called,
//! which prompt template a call is rendered from, and where the report counts a
//! candidate. Every per-kind fact lives in one `match` here, so a new kind does not
//! compile until it says each of them (docs/architecture.md, Add a pipeline step).

use super::{CallKind, CandidateKind};

/// Where a call's prompt template comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallTemplate {
    /// The template `prompts/<name>.j2`.
    Named(&'static str),
    /// The template of the call's tuning stage (`prompts/stage_<stage>.j2`).
    OfStage,
}

/// What a call kind is: its word and its template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallKindInfo {
    /// Short word for tags, logs, the views and the report's usage table (`seed`,
    /// `optimize`...); also its `events.jsonl` form.
    pub word: &'static str,
    pub template: CallTemplate,
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
    /// Everything said about the kind: adding a kind starts here.
    pub const fn descriptor(self) -> CallKindInfo {
        let (word, template) = match self {
            CallKind::Seed => ("seed", CallTemplate::Named("seed")),
            CallKind::Repair => ("repair", CallTemplate::Named("repair")),
            CallKind::Analysis => ("analysis", CallTemplate::Named("analysis")),
            CallKind::Optimize => ("optimize", CallTemplate::Named("optimize_from_analysis")),
            CallKind::Stage => ("stage", CallTemplate::OfStage),
            CallKind::Instructed => ("instructed", CallTemplate::Named("instructed")),
        };
        CallKindInfo { word, template }
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
    use crate::protocol::CallId;

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
        for kind in [
            CallKind::Seed,
            CallKind::Repair,
            CallKind::Analysis,
            CallKind::Optimize,
            CallKind::Stage,
            CallKind::Instructed,
        ] {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json.as_str(), Some(kind.descriptor().word));
        }
        for kind in [
            CandidateKind::Seed { index: 1 },
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
