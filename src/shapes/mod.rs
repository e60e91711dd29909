//! Unseen shapes (issue 25, "Verified wins"): a kernel that is right only for the task's own
//! sizes is not a win. This module derives variants of a KernelBench task's sizes from its
//! module-level integer constants (`batch_size = 16`, `dim = 16384`, `M = 1024`) and
//! `check` re-evaluates a kernel on each, for correctness only, with a fresh seed.
//!
//! The rule (docs/eval-result.md, "Unseen shapes"): a module-level `NAME = <int literal>`
//! assigned once is a size, and is varied, when its value is at least 8 and its name is not
//! structural (kernel, stride, padding, dilation, groups, layers, heads, axes, pooling
//! windows, reduction dims, indices). Small values are kept because they are axes and
//! counts (`dim = 1` of a reduction is an axis), not sizes. Variants, in order, de-duplicated:
//! half; an odd size near a quarter (at least 3); an odd size near three quarters; an odd
//! size near five quarters (larger than the task's, refused by the judge's memory plan when
//! it does not fit); batch-like sizes (`batch_size`, `batch`, `bs`, `n_batch`, `num_batches`) set to 1, the others kept.
//! Odd sizes are never multiples of 8, 16 or 32, so a kernel that assumes its block size
//! divides the data is caught.

pub mod check;

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

/// `n` made odd (one more when even), at least `floor`.
fn odd(n: u64, floor: u64) -> u64 {
    let n = n.max(floor);
    if n.is_multiple_of(2) { n + 1 } else { n }
}

/// The size a rule gives a task size `v` (>= `MIN_SIZE`).
fn apply(rule: VariantRule, name: &str, v: u64) -> u64 {
    match rule {
        VariantRule::Half => v / 2,
        VariantRule::OddQuarter => odd(v / 4, 3),
        VariantRule::OddThreeQuarters => odd(v * 3 / 4, 3),
        VariantRule::OddFiveQuarters => odd(v * 5 / 4, 3),
        VariantRule::BatchOne => {
            if is_batch(name) {
                1
            } else {
                v
            }
        }
    }
}

const RULES: [VariantRule; 5] = [
    VariantRule::Half,
    VariantRule::OddQuarter,
    VariantRule::OddThreeQuarters,
    VariantRule::OddFiveQuarters,
    VariantRule::BatchOne,
];

/// The variants of a task's source (at most five, none equal to the task or to another).
pub fn derive(source: &str) -> Derivation {
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
    let mut variants: Vec<Variant> = Vec::new();
    for rule in RULES {
        let varied: BTreeMap<String, u64> = sizes
            .iter()
            .map(|c| (c.name.clone(), apply(rule, &c.name, c.value)))
            .collect();
        if varied == original || variants.iter().any(|v| v.sizes == varied) {
            continue;
        }
        let Some(text) = replace_literals(source, &sizes, &varied) else {
            continue;
        };
        variants.push(Variant {
            rule,
            sizes: varied,
            source: text,
        });
    }
    Derivation::Variable {
        original,
        kept,
        variants,
    }
}

/// The source with each size's literal replaced on its own line (None when a line does
/// not read `NAME = LITERAL` as expected: a constant spread over lines).
fn replace_literals(
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
