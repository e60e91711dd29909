//! The re-check of a kernel on unseen shapes and seeds (issue 25, "Verified wins"): what
//! each variant of the task's sizes gave and the verdict over all of them. Written to a
//! session's `shapes/<id>.json`, carried by the `shapes_checked` event and printed by
//! `kforge eval --shapes`. How variants are derived: `crate::shapes`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Category;

/// The rule that made a variant from the task's sizes (`crate::shapes` applies it). Each
/// draws every varied size at random (its own draw per size) from a range of the task's
/// value, with the check's family seed: the kernel cannot know the sizes it will meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VariantRule {
    /// Any size from a quarter of the task's to one less than it.
    Below,
    /// An odd size from a quarter of the task's to one less than it: no multiple of 8, 16
    /// or 32.
    OddBelow,
    /// An odd size from 3 to a quarter of the task's.
    OddSmall,
    /// An odd size above the task's, up to a quarter more: larger than the task's.
    OddAbove,
    /// The batch-like sizes set to 1, the others drawn as `Below` draws them.
    BatchOne,
    /// Every varied size halved (the fixed variants of earlier kforge versions, read back
    /// from their sessions; never derived now).
    Half,
    /// Every varied size near a quarter, made odd (earlier versions).
    OddQuarter,
    /// Every varied size near three quarters, made odd (earlier versions).
    OddThreeQuarters,
    /// Every varied size near five quarters, made odd (earlier versions).
    OddFiveQuarters,
}

impl VariantRule {
    /// What the rule does, for docs, verdicts and reports.
    pub fn describe(self) -> &'static str {
        match self {
            VariantRule::Below => "random sizes below the task's",
            VariantRule::OddBelow => "random odd sizes below the task's",
            VariantRule::OddSmall => "random odd sizes under a quarter of the task's",
            VariantRule::OddAbove => "random odd sizes above the task's (larger)",
            VariantRule::BatchOne => "batch of 1, other sizes random below the task's",
            VariantRule::Half => "half of each size",
            VariantRule::OddQuarter => "an odd size near a quarter",
            VariantRule::OddThreeQuarters => "an odd size near three quarters",
            VariantRule::OddFiveQuarters => "an odd size near five quarters (larger)",
        }
    }
}

/// What one variant's evaluation (correctness only, its own seed) said of the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum VariantOutcome {
    Correct,
    /// The kernel failed on this variant: the judge's category and one-line summary.
    Wrong {
        category: Category,
        summary: String,
    },
    /// Not counted for or against the kernel: what the judge saw before the kernel's code
    /// ran (the variant's own reference failed, its memory plan does not fit, the harness
    /// failed), or the evaluation was not run.
    Skipped {
        why: String,
    },
}

/// One variant of the task's sizes and what the kernel did on it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantCheck {
    pub rule: VariantRule,
    /// Every varied size of the variant, by the task's constant name.
    pub sizes: BTreeMap<String, u64>,
    /// The base seed of the variant's parameters and inputs.
    pub seed: u64,
    #[serde(flatten)]
    pub outcome: VariantOutcome,
}

impl VariantCheck {
    /// `batch_size=8, dim=12287`.
    pub fn sizes_text(&self) -> String {
        self.sizes
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The verdict over every variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum ShapeVerdict {
    /// Correct on every variant that ran (`passed == checked`, at least one).
    Generalizes { passed: usize, checked: usize },
    /// Wrong on `failed` of the `checked` variants that ran.
    FailsOn { failed: usize, checked: usize },
    /// The task's sizes cannot be varied (why, in a sentence).
    NotVariable { why: String },
    /// Variants exist but none could be checked (every one skipped), or the check could
    /// not be made.
    NotRun { why: String },
}

impl ShapeVerdict {
    /// Whether the kernel was shown right on every variant that ran.
    pub fn generalizes(&self) -> bool {
        matches!(self, ShapeVerdict::Generalizes { .. })
    }

    /// Whether the kernel was shown wrong on some variant.
    pub fn fails(&self) -> bool {
        matches!(self, ShapeVerdict::FailsOn { .. })
    }

    /// Whether the check lets the kernel count as a win: right on every variant that ran,
    /// or the task's sizes cannot be varied. A check that did not run (`not_run`: every
    /// variant skipped, or no check made) never passes.
    pub fn passes(&self) -> bool {
        matches!(
            self,
            ShapeVerdict::Generalizes { .. } | ShapeVerdict::NotVariable { .. }
        )
    }

    /// A short mark for tables and the tree: `5/5`, `FAIL 1/5`, `n/a`, `not run`.
    pub fn mark(&self) -> String {
        match self {
            ShapeVerdict::Generalizes { passed, checked } => format!("{passed}/{checked}"),
            ShapeVerdict::FailsOn { failed, checked } => {
                format!("FAIL {}/{checked}", checked - failed)
            }
            ShapeVerdict::NotVariable { .. } => "n/a".into(),
            ShapeVerdict::NotRun { .. } => "not run".into(),
        }
    }
}

/// The whole re-check of one kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShapeCheck {
    #[serde(flatten)]
    pub verdict: ShapeVerdict,
    /// The task's sizes the variants change, as the task sets them.
    pub original: BTreeMap<String, u64>,
    /// Integer constants left as they are, each with why (`kernel_size: structural`).
    pub kept: BTreeMap<String, String>,
    pub variants: Vec<VariantCheck>,
    /// One line: `correct on 5 of 5 shapes`, or the first shape that fails and how.
    pub line: String,
    /// The seed the variants' sizes and inputs were drawn with: chosen for each check by
    /// kforge when the check starts, after the kernel exists, and recorded here (None in
    /// checks of earlier versions, whose variants were fixed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family_seed: Option<u64>,
}

impl ShapeCheck {
    /// Whether the kernel was shown wrong on some variant.
    pub fn fails(&self) -> bool {
        self.verdict.fails()
    }

    /// Whether the check lets the kernel count as a win (`ShapeVerdict::passes`).
    pub fn passes(&self) -> bool {
        self.verdict.passes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{CandidateId, Event};

    #[test]
    fn the_shapes_checked_event_is_one_flat_line_and_reads_back() {
        let event = Event::ShapesChecked {
            candidate: CandidateId(7),
            result_file: "shapes/7.json".into(),
            verdict: ShapeVerdict::FailsOn {
                failed: 1,
                checked: 5,
            },
            line: "wrong on dim=12289: mismatch: x".into(),
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "shapes_checked",
                "candidate": 7,
                "result_file": "shapes/7.json",
                "verdict": "fails_on",
                "failed": 1,
                "checked": 5,
                "line": "wrong on dim=12289: mismatch: x",
            })
        );
        assert_eq!(serde_json::from_value::<Event>(json).unwrap(), event);
        let not_variable = ShapeVerdict::NotVariable { why: "no".into() };
        let back: ShapeVerdict =
            serde_json::from_value(serde_json::to_value(&not_variable).unwrap()).unwrap();
        assert_eq!(back, not_variable);
    }
}

/// The task's sizes an evaluation on the CPU ran at instead of the task's own (issue 38):
/// Triton's interpreter runs a kernel's programs one after another in Python, so a task
/// sized for a GPU (a 4096x5120 ReLU) takes minutes per trial there. kforge shrinks the
/// task's size constants (the ones `--shapes` varies) before a CPU evaluation, by one
/// factor (`crate::shapes::interpreter`), and records it here so that nobody mistakes the verdict for one at the task's
/// sizes. `[eval] interpreter_sizes = "task"` (or `kforge eval --task-sizes`) keeps them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct InterpreterSizes {
    /// The task's sizes, as its file sets them.
    pub task: BTreeMap<String, u64>,
    /// The sizes the evaluation ran at (only those changed differ from `task`).
    pub evaluated: BTreeMap<String, u64>,
    /// The most the product of the two largest evaluated sizes may be
    /// (`crate::shapes::interpreter::BUDGET`).
    pub budget: u64,
}

impl InterpreterSizes {
    /// `batch_size 4096 -> 256, dim 5120 -> 320`.
    pub fn changes_text(&self) -> String {
        self.task
            .iter()
            .filter_map(|(name, task)| {
                let evaluated = self.evaluated.get(name)?;
                (evaluated != task).then(|| format!("{name} {task} -> {evaluated}"))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The sentence a verdict says: what ran, why, and how to keep the task's sizes.
    pub fn describe(&self) -> String {
        format!(
            "sizes shrunk for Triton's interpreter on the CPU: {} (correctness at these sizes, \
             not the task's; `kforge eval --task-sizes` or `[eval] interpreter_sizes = \"task\"` \
             keeps the task's sizes, a GPU runs them in seconds)",
            self.changes_text()
        )
    }
}

/// `[eval] interpreter_sizes`: at which sizes an evaluation on the CPU runs a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterpreterSizePolicy {
    /// The task's size constants shrunk to the interpreter's budget (the default), recorded
    /// in the result's `interpreter_sizes`.
    #[default]
    Shrink,
    /// The task's own sizes, however long the interpreter takes.
    Task,
}
