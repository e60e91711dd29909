//! Unseen shapes (issue 25, "Verified wins"): a kernel that is right only for the task's own
//! sizes is not a win. This module derives variants of a KernelBench task's sizes from its
//! module-level integer constants (`batch_size = 16`, `dim = 16384`, `M = 1024`) and
//! `check` re-evaluates a kernel on each, for correctness only, with a fresh seed.
//!
//! The rule (docs/eval-result.md, "Unseen shapes"): a module-level `NAME = <int literal>`
//! assigned once is a size, and is varied, when its value is at least 8 and its name is not
//! structural (kernel, stride, padding, dilation, groups, layers, heads, axes, pooling
//! windows, reduction dims, indices). Small values are kept because they are axes and
//! counts (`dim = 1` of a reduction is an axis), not sizes. Variants, in order, each size
//! drawn on its own with the check's family seed (issue 34: fixed variants let a kernel
//! that handles only the task's sizes and those few pass): any size below the task's (from
//! a quarter of it); an odd one below it; an odd one under a quarter of it (at least 3); an
//! odd one above it, up to a quarter more (refused by the judge's memory plan when it does
//! not fit); batch-like sizes (`batch_size`, `batch`, `bs`, `n_batch`, `num_batches`) set to
//! 1, the others drawn below the task's. Odd sizes are never multiples of 8, 16 or 32, so a
//! kernel that assumes its block size divides the data is caught.

pub mod interpreter;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

pub use crate::protocol::shapes::{
    ShapeCheck, ShapeVerdict, VariantCheck, VariantOutcome, VariantRule,
};
use crate::pysource;

/// The smallest value taken for a size; below it a constant is an axis or a count.
pub const MIN_SIZE: u64 = 8;

/// Name parts that make a constant structural, whatever its value: the task's operator
/// parameters, not the sizes of its data.
const STRUCTURAL_PARTS: &[&str] = &[
    "kernel",
    "stride",
    "strides",
    "pad",
    "padding",
    "dilation",
    "dilations",
    "group",
    "groups",
    "layer",
    "layers",
    "head",
    "heads",
    "axis",
    "axes",
    "pool",
    "window",
    "idx",
    "index",
    "offset",
    "shift",
    "seed",
    "iterations",
    "iters",
    "steps",
    "repeat",
    "repeats",
    "bits",
];

/// Name parts that, before a `dim`, make it the axis an operator works along
/// (`reduce_dim`, `softmax_dim`), not a size.
const AXIS_DIM_PARTS: &[&str] = &[
    "reduce",
    "reduction",
    "scan",
    "cumsum",
    "cumprod",
    "concat",
    "cat",
    "split",
    "sum",
    "mean",
    "max",
    "min",
    "argmax",
    "argmin",
    "norm",
    "softmax",
    "sort",
    "topk",
];

/// Names of the batch dimension (case-insensitive, whole name).
const BATCH_NAMES: &[&str] = &["batch_size", "batch", "bs", "n_batch", "num_batches"];

/// A module-level integer constant of the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constant {
    pub name: String,
    pub value: u64,
    /// 1-based line of its assignment.
    pub line: usize,
    /// The literal as written (`16_384`).
    pub literal: String,
}

/// Whether a constant is varied, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Size,
    Kept(String),
}

/// One variant of the task: its sizes and the task text with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub rule: VariantRule,
    pub sizes: BTreeMap<String, u64>,
    /// The task source with the varied literals replaced, nothing else changed.
    pub source: String,
}

/// What the task's sizes allow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Derivation {
    Variable {
        /// The sizes varied, as the task sets them.
        original: BTreeMap<String, u64>,
        /// Integer constants kept, each with why.
        kept: BTreeMap<String, String>,
        variants: Vec<Variant>,
    },
    /// The task's sizes cannot be varied; the sentence says why.
    NotVariable { why: String },
}

static INT_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[0-9](?:_?[0-9])*$").expect("valid regex"));

/// The module-level constants assigned an integer literal exactly once (a name assigned
/// again at module level, by anything, is left out: its value at run time is not the literal).
pub fn constants(source: &str) -> Vec<Constant> {
    let lines = pysource::logical_lines(source);
    let mut assigned: BTreeMap<String, usize> = BTreeMap::new();
    let mut found = Vec::new();
    for line in lines.iter().filter(|l| l.indent == 0) {
        let Some(a) = pysource::assignment(&line.code) else {
            continue;
        };
        for t in &a.targets {
            *assigned.entry(t.clone()).or_default() += 1;
        }
        if a.targets.len() != 1 || a.augmented.is_some() {
            continue;
        }
        let literal = a.value.trim();
        if !INT_LITERAL.is_match(literal) {
            continue;
        }
        let Ok(value) = literal.replace('_', "").parse::<u64>() else {
            continue;
        };
        found.push(Constant {
            name: a.targets[0].clone(),
            value,
            line: line.line,
            literal: literal.to_string(),
        });
    }
    found
        .into_iter()
        .filter(|c| assigned.get(&c.name) == Some(&1))
        .collect()
}

/// Whether a constant is a size the variants change.
pub fn role(constant: &Constant) -> Role {
    let lower = constant.name.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split('_').filter(|p| !p.is_empty()).collect();
    if let Some(part) = parts.iter().find(|p| STRUCTURAL_PARTS.contains(p)) {
        return Role::Kept(format!("structural (`{part}`)"));
    }
    let axis_dim = parts.windows(2).any(|w| {
        (w[1] == "dim" || w[1] == "dims") && AXIS_DIM_PARTS.contains(&w[0])
            || (w[0] == "dim" && (w[1] == "idx" || w[1] == "index"))
    });
    if axis_dim {
        return Role::Kept("an axis, not a size".into());
    }
    if constant.value < MIN_SIZE {
        return Role::Kept(format!(
            "{} is below {MIN_SIZE}: an axis or a count, not a size",
            constant.value
        ));
    }
    Role::Size
}

fn is_batch(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    BATCH_NAMES.contains(&lower.as_str())
}

/// A small deterministic generator (SplitMix64): the same family seed draws the same
/// variants, so a recorded check can be derived again.
pub struct Draw(u64);

impl Draw {
    pub fn new(seed: u64) -> Draw {
        Draw(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `low..=high` (`low` where the range is empty).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        low + self.next_u64() % (high - low + 1)
    }

    /// An odd value in `low..=high`; the odd number at or above `low` where there is none.
    pub fn odd_between(&mut self, low: u64, high: u64) -> u64 {
        let low = low | 1;
        if high <= low {
            return low;
        }
        low + 2 * self.between(0, (high - low) / 2)
    }
}

/// The size a rule draws for a task size `v` (>= `MIN_SIZE`).
fn apply(rule: VariantRule, name: &str, v: u64, draw: &mut Draw) -> u64 {
    let quarter = (v / 4).max(3);
    match rule {
        VariantRule::Below => draw.between(quarter, v - 1),
        VariantRule::OddBelow => draw.odd_between(quarter, v - 1),
        VariantRule::OddSmall => draw.odd_between(3, quarter),
        VariantRule::OddAbove => draw.odd_between(v + 1, v + v / 4),
        VariantRule::BatchOne if is_batch(name) => 1,
        VariantRule::BatchOne => draw.between(quarter, v - 1),
        // The fixed rules of earlier versions, kept for the records they left.
        VariantRule::Half => v / 2,
        VariantRule::OddQuarter => (v / 4).max(3) | 1,
        VariantRule::OddThreeQuarters => (v * 3 / 4).max(3) | 1,
        VariantRule::OddFiveQuarters => (v * 5 / 4).max(3) | 1,
    }
}

const RULES: [VariantRule; 5] = [
    VariantRule::Below,
    VariantRule::OddBelow,
    VariantRule::OddSmall,
    VariantRule::OddAbove,
    VariantRule::BatchOne,
];

/// Draws a rule gets before it gives up on a variant unlike the others (tiny sizes leave
/// few values to draw from).
const DRAWS_PER_RULE: usize = 8;

/// The task's sizes kforge may vary (`batch_size = 16`...), by name: what a prompt may say
/// about them without naming a variant the judge will draw.
pub fn variable_sizes(source: &str) -> BTreeMap<String, u64> {
    constants(source)
        .into_iter()
        .filter(|c| matches!(role(c), Role::Size))
        .map(|c| (c.name, c.value))
        .collect()
}

/// The variants of a task's source drawn with `family_seed` (at most five, none equal to the
/// task or to another; a batch-of-1 variant only where the task has a batch-like size).
pub fn derive(source: &str, family_seed: u64) -> Derivation {
    let constants = constants(source);
    let mut kept = BTreeMap::new();
    let mut sizes = Vec::new();
    for c in constants {
        match role(&c) {
            Role::Size => sizes.push(c),
            Role::Kept(why) => {
                kept.insert(c.name.clone(), why);
            }
        }
    }
    if sizes.is_empty() {
        let why = if kept.is_empty() {
            "the task sets no sizes as module-level integer constants (`batch_size = 16`), so kforge cannot vary them".to_string()
        } else {
            format!(
                "none of the task's integer constants is a size kforge may vary ({})",
                kept.iter()
                    .map(|(n, w)| format!("{n}: {w}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        return Derivation::NotVariable { why };
    }
    let original: BTreeMap<String, u64> = sizes.iter().map(|c| (c.name.clone(), c.value)).collect();
    let has_batch = sizes.iter().any(|c| is_batch(&c.name));
    let mut draw = Draw::new(family_seed);
    let mut variants: Vec<Variant> = Vec::new();
    for rule in RULES {
        if rule == VariantRule::BatchOne && !has_batch {
            continue;
        }
        for _ in 0..DRAWS_PER_RULE {
            let varied: BTreeMap<String, u64> = sizes
                .iter()
                .map(|c| (c.name.clone(), apply(rule, &c.name, c.value, &mut draw)))
                .collect();
            if varied == original || variants.iter().any(|v| v.sizes == varied) {
                continue;
            }
            if let Some(text) = replace_literals(source, &sizes, &varied) {
                variants.push(Variant {
                    rule,
                    sizes: varied,
                    source: text,
                });
            }
            break;
        }
    }
    Derivation::Variable {
        original,
        kept,
        variants,
    }
}

/// The source with each size's literal replaced on its own line (None when a line does
/// not read `NAME = LITERAL` as expected: a constant spread over lines).
pub(crate) fn replace_literals(
    source: &str,
    sizes: &[Constant],
    values: &BTreeMap<String, u64>,
) -> Option<String> {
    let mut lines: Vec<String> = source.split_inclusive('\n').map(str::to_string).collect();
    for c in sizes {
        let value = *values.get(&c.name)?;
        if value == c.value {
            continue;
        }
        let physical = lines.get_mut(c.line.checked_sub(1)?)?;
        let pattern = Regex::new(&format!(
            r"^(\s*{}\s*(?::[^=]*)?=\s*){}\b",
            regex::escape(&c.name),
            regex::escape(&c.literal)
        ))
        .ok()?;
        let replaced = pattern.replace(physical, format!("${{1}}{value}"));
        if replaced == *physical {
            return None;
        }
        *physical = replaced.into_owned();
    }
    Some(lines.concat())
}

/// The check as `kforge eval --shapes` prints it: the line, then one line a variant.
pub fn describe(check: &ShapeCheck) -> String {
    let mut out = format!("unseen shapes {}\n", check.line);
    for v in &check.variants {
        let said = match &v.outcome {
            VariantOutcome::Correct => "correct".to_string(),
            VariantOutcome::Wrong { category, summary } => {
                format!("WRONG, {}: {summary}", category.as_str())
            }
            VariantOutcome::Skipped { why } => format!("skipped: {why}"),
        };
        out.push_str(&format!(
            "  {} ({}, seed {}): {said}\n",
            v.sizes_text(),
            v.rule.describe(),
            v.seed
        ));
    }
    if !check.kept.is_empty() {
        let kept: Vec<String> = check
            .kept
            .iter()
            .map(|(n, w)| format!("{n} ({w})"))
            .collect();
        out.push_str(&format!("  kept: {}\n", kept.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests;
