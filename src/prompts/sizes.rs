//! What the prompts say about sizes: the kernel must be right for sizes other than the
//! task's, because the judge re-checks the best kernel on unseen ones (`crate::shapes`);
//! and, when it was not, which sizes failed and how, for the repair.

use serde::{Deserialize, Serialize};

use crate::protocol::shapes::{ShapeCheck, VariantOutcome};
use crate::shapes::variable_sizes;

/// The sizes rule of the prompts for this task (rule 11 of `_rules.j2`).
pub fn size_rule(task_source: &str) -> String {
    let general = "Read every size from the input tensors at run time (`x.shape`, `x.stride()`, `weight.shape`), compute the grid from those sizes, and mask every tile edge; never hard-code the task's numbers or assume a BLOCK divides a size.";
    let original = variable_sizes(task_source);
    if original.is_empty() {
        return format!(
            "Sizes: the task's sizes are fixed, but write the kernel for the shapes it receives. {general}"
        );
    }
    let sizes: Vec<String> = original
        .iter()
        .map(|(name, value)| format!("`{name}` = {value}"))
        .collect();
    format!(
        "Sizes: the task sets {}, but the kernel must be correct for any values of {}: the judge re-checks the best kernel on unseen sizes (smaller, larger, odd sizes that are no multiple of 8, 16 or 32, a batch of 1), each with fresh inputs, and a kernel wrong on any of them is sent back for repair and is not a win. {general}",
        join_words(&sizes),
        if sizes.len() == 1 { "it" } else { "these" },
    )
}

fn join_words(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A kernel correct on the task's sizes and wrong on unseen ones, for its repair prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct UnseenSizes {
    /// The task's own sizes, `batch_size=512, dim=32768`.
    pub task_sizes: String,
    /// Each failing variant: `batch_size=8, dim=12287: mismatch: out: 12 of 98296 elements ...`.
    pub failing: Vec<String>,
    /// Variants it was right on.
    pub passing: Vec<String>,
}

impl UnseenSizes {
    /// From a check that failed; `None` when it did not.
    pub fn from_check(check: &ShapeCheck) -> Option<UnseenSizes> {
        if !check.fails() {
            return None;
        }
        let mut out = UnseenSizes {
            task_sizes: check
                .original
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join(", "),
            ..Default::default()
        };
        for v in &check.variants {
            match &v.outcome {
                VariantOutcome::Wrong { category, summary } => out.failing.push(format!(
                    "{}: {}: {}",
                    v.sizes_text(),
                    category.as_str(),
                    crate::pysource::traceback::scrub_paths(summary)
                )),
                VariantOutcome::Correct => out.passing.push(v.sizes_text()),
                VariantOutcome::Skipped { .. } => {}
            }
        }
        Some(out)
    }

    /// The first failing variant's category, for the hints.
    pub fn category(check: &ShapeCheck) -> Option<crate::protocol::Category> {
        check.variants.iter().find_map(|v| match &v.outcome {
            VariantOutcome::Wrong { category, .. } => Some(*category),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_names_the_task_sizes_that_will_vary() {
        let rule = size_rule(include_str!("../../examples/tasks/softmax.py"));
        assert!(
            rule.starts_with(
                "Sizes: the task sets `batch_size` = 512 and `dim` = 32768, but the kernel must be correct for any values of these"
            ),
            "{rule}"
        );
        assert!(rule.contains("no multiple of 8, 16 or 32"), "{rule}");
        let fixed =
            size_rule("class Model:\n    pass\ndef get_inputs():\n    return [torch.rand(4)]\n");
        assert!(
            fixed.starts_with("Sizes: the task's sizes are fixed"),
            "{fixed}"
        );
    }
}
