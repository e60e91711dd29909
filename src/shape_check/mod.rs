//! Re-checks a kernel on the task's shape variants: each variant's task file written beside
//! the others, each evaluated for correctness only with its own seed through whatever
//! evaluates kernels (the engine's `EvalPort`, the CLI's `Evaluator`), each in its own
//! process as every evaluation is. The variants' sizes and seeds come from a family seed
//! kforge draws when the check starts (after the kernel exists) and records in the check.
//! The judge decides every variant; a variant is skipped (not counted against the kernel)
//! only for what the judge saw before the kernel's code ran: its own reference failing, its
//! memory plan not fitting, the harness failing. Whatever the kernel's process reports about
//! itself is the kernel's.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use futures::future::BoxFuture;

use crate::config::EvalConfig;
use crate::eval::{Device, EvalError, EvalRequest};
use crate::protocol::shapes::InterpreterSizePolicy;
use crate::protocol::{Category, EvalResult};
use crate::shapes::{
    Derivation, Draw, ShapeCheck, ShapeVerdict, VariantCheck, VariantOutcome, derive, interpreter,
};

/// What evaluates one variant: the engine's `EvalPort`, the CLI's `Evaluator` (a boxed
/// future, so that the check can run inside spawned tasks).
pub type Evaluate<'a> =
    dyn Fn(EvalRequest) -> BoxFuture<'a, Result<EvalResult, EvalError>> + Send + Sync + 'a;

/// The seed of the `k`-th variant's inputs and parameters (0-based), from the check's family
/// seed: fresh for each, below 2^31 (the harness adds offsets to it).
pub fn variant_seed(family_seed: u64, k: usize) -> u64 {
    let mut draw = Draw::new(family_seed ^ 0x5EED_0F1A_7E57);
    let mut seed = 0;
    for _ in 0..=k {
        seed = draw.next_u64();
    }
    seed % (1 << 31)
}

/// A family seed for a check: from the operating system's randomness, so that no kernel
/// written before the check can know the sizes it will meet.
pub fn fresh_family_seed() -> u64 {
    use std::io::Read;
    let mut bytes = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok()
    {
        return u64::from_le_bytes(bytes);
    }
    // No /dev/urandom: the standard library's per-process random keys, and the time.
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// One variant ready to evaluate: its task file on disk.
#[derive(Debug, Clone)]
pub struct PreparedVariant {
    pub check: VariantCheck,
    pub task_file: PathBuf,
}

/// What `prepare` found: variants to evaluate, or a finished check (nothing to run).
#[derive(Debug, Clone)]
pub enum Plan {
    Run {
        template: ShapeCheck,
        variants: Vec<PreparedVariant>,
    },
    Finished(ShapeCheck),
}

/// Derives the variants of `task_source` with `family_seed` and writes each as
/// `dir/shape<k>_task.py`.
pub fn prepare(task_source: &str, dir: &Path, family_seed: u64) -> Result<Plan> {
    let (original, kept, variants) = match derive(task_source, family_seed) {
        Derivation::NotVariable { why } => {
            return Ok(Plan::Finished(finish(ShapeCheck {
                verdict: ShapeVerdict::NotVariable { why },
                original: Default::default(),
                kept: Default::default(),
                variants: Vec::new(),
                line: String::new(),
                family_seed: Some(family_seed),
            })));
        }
        Derivation::Variable {
            original,
            kept,
            variants,
        } => (original, kept, variants),
    };
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut prepared = Vec::new();
    for (k, v) in variants.into_iter().enumerate() {
        let task_file = dir.join(format!("shape{}_task.py", k + 1));
        std::fs::write(&task_file, &v.source)
            .with_context(|| format!("cannot write {}", task_file.display()))?;
        prepared.push(PreparedVariant {
            check: VariantCheck {
                rule: v.rule,
                sizes: v.sizes,
                seed: variant_seed(family_seed, k),
                outcome: VariantOutcome::Skipped {
                    why: "not evaluated".into(),
                },
            },
            task_file,
        });
    }
    let template = ShapeCheck {
        verdict: ShapeVerdict::NotRun {
            why: "not evaluated".into(),
        },
        original,
        kept,
        variants: Vec::new(),
        line: String::new(),
        family_seed: Some(family_seed),
    };
    Ok(Plan::Run {
        template,
        variants: prepared,
    })
}

/// The request evaluating `kernel` on a variant: correctness only, the variant's seed.
pub fn request(
    variant: &PreparedVariant,
    kernel: &Path,
    device: Device,
    settings: &EvalConfig,
) -> EvalRequest {
    let mut settings = settings.clone();
    settings.seed = variant.check.seed;
    // A variant runs at the sizes it records, never shrunk again on the CPU.
    settings.interpreter_sizes = Some(InterpreterSizePolicy::Task);
    let mut request = EvalRequest::new(&variant.task_file, kernel, device, settings);
    request.timing = false;
    request.profile = false;
    request
}

/// What a variant's evaluation says of the kernel. Skipped only for what the judge saw
/// before the kernel's code ran (`details.kernel_loaded: false`, which the judge sets from
/// its own knowledge, never from the kernel's process): the variant's own reference failing
/// (`task`), its memory plan not fitting (`oom`), the harness failing. Any other failure,
/// whatever the kernel's process said about it, is the kernel's.
pub fn outcome(result: &EvalResult) -> VariantOutcome {
    if result.correct {
        return VariantOutcome::Correct;
    }
    let summary = first_line(&result.summary);
    let before_kernel =
        result.details.get("kernel_loaded") == Some(&serde_json::Value::Bool(false));
    match result.category {
        Some(Category::Task) => VariantOutcome::Skipped {
            why: format!("the task's own reference fails on these sizes: {summary}"),
        },
        Some(Category::Oom) if before_kernel => VariantOutcome::Skipped {
            why: format!("does not fit: {summary}"),
        },
        Some(Category::Harness) if before_kernel => VariantOutcome::Skipped {
            why: format!("the evaluator gave no verdict: {summary}"),
        },
        Some(category) => VariantOutcome::Wrong { category, summary },
        None => VariantOutcome::Wrong {
            category: Category::Harness,
            summary: format!("failed without a category: {summary}"),
        },
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    let mut out: String = line.chars().take(240).collect();
    if line.chars().count() > 240 {
        out.push('…');
    }
    out
}

/// Evaluates every prepared variant with `evaluate` and builds the check. `Err` only when
/// an evaluation gave no result (cancelled, the evaluator stopped).
pub async fn run(
    plan: Plan,
    kernel: &Path,
    device: Device,
    settings: &EvalConfig,
    evaluate: &Evaluate<'_>,
) -> Result<ShapeCheck, EvalError> {
    let (mut check, variants) = match plan {
        Plan::Finished(check) => return Ok(check),
        Plan::Run { template, variants } => (template, variants),
    };
    for variant in variants {
        let result = evaluate(request(&variant, kernel, device, settings)).await?;
        check.variants.push(VariantCheck {
            outcome: outcome(&result),
            ..variant.check
        });
    }
    Ok(finish(check))
}

/// Derives (with a fresh family seed), writes into `dir` and evaluates: the whole check of
/// one kernel.
pub async fn check_kernel(
    task_source: &str,
    kernel: &Path,
    dir: &Path,
    device: Device,
    settings: &EvalConfig,
    evaluate: &Evaluate<'_>,
) -> Result<ShapeCheck, EvalError> {
    let family_seed = fresh_family_seed();
    check_kernel_seeded(
        task_source,
        kernel,
        dir,
        device,
        settings,
        evaluate,
        family_seed,
    )
    .await
}

/// `check_kernel` with a given family seed: a recorded check derived again.
pub async fn check_kernel_seeded(
    task_source: &str,
    kernel: &Path,
    dir: &Path,
    device: Device,
    settings: &EvalConfig,
    evaluate: &Evaluate<'_>,
    family_seed: u64,
) -> Result<ShapeCheck, EvalError> {
    // On the CPU the kernel was judged at the interpreter's sizes (issue 38): the variants
    // are drawn around those, and each is evaluated at exactly the sizes it records.
    let shrunk = crate::eval::interpreter::at_interpreter_sizes(device, settings)
        .then(|| interpreter::shrink(task_source, interpreter::BUDGET))
        .flatten();
    let task_source = shrunk.as_ref().map_or(task_source, |s| s.source.as_str());
    let plan = match prepare(task_source, dir, family_seed) {
        Ok(plan) => plan,
        Err(e) => {
            return Ok(not_run(format!("the variants could not be written: {e:#}")));
        }
    };
    run(plan, kernel, device, settings, evaluate).await
}

/// A check that could not be made, and why.
pub fn not_run(why: String) -> ShapeCheck {
    finish(ShapeCheck {
        verdict: ShapeVerdict::NotRun { why },
        original: Default::default(),
        kept: Default::default(),
        variants: Vec::new(),
        line: String::new(),
        family_seed: None,
    })
}

/// Sets the verdict (from the variants, unless the task is not variable or nothing could
/// run) and the one line.
pub fn finish(mut check: ShapeCheck) -> ShapeCheck {
    let ran = !check.variants.is_empty();
    if ran {
        check.verdict = verdict(&check.variants);
    }
    check.line = line(&check);
    check
}

/// The verdict over variants that were evaluated.
pub fn verdict(variants: &[VariantCheck]) -> ShapeVerdict {
    let checked = variants
        .iter()
        .filter(|v| !matches!(v.outcome, VariantOutcome::Skipped { .. }))
        .count();
    let failed = variants
        .iter()
        .filter(|v| matches!(v.outcome, VariantOutcome::Wrong { .. }))
        .count();
    if failed > 0 {
        ShapeVerdict::FailsOn { failed, checked }
    } else if checked > 0 {
        ShapeVerdict::Generalizes {
            passed: checked,
            checked,
        }
    } else {
        ShapeVerdict::NotRun {
            why: format!(
                "every variant was skipped ({})",
                variants
                    .iter()
                    .filter_map(|v| match &v.outcome {
                        VariantOutcome::Skipped { why } =>
                            Some(format!("{}: {why}", v.sizes_text())),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        }
    }
}

/// `correct on 5 of 5 shapes`, `wrong on batch_size=8, dim=12287: mismatch: ...`, or what
/// kept the check from running.
pub fn line(check: &ShapeCheck) -> String {
    let skipped = check
        .variants
        .iter()
        .filter(|v| matches!(v.outcome, VariantOutcome::Skipped { .. }))
        .count();
    let skipped_note = if skipped > 0 {
        format!(" ({skipped} skipped: failed before the kernel ran)")
    } else {
        String::new()
    };
    match &check.verdict {
        ShapeVerdict::Generalizes { passed, checked } => {
            format!("correct on {passed} of {checked} unseen shapes{skipped_note}")
        }
        ShapeVerdict::FailsOn { failed, checked } => {
            let first = check
                .variants
                .iter()
                .find_map(|v| match &v.outcome {
                    VariantOutcome::Wrong { category, summary } => Some(format!(
                        "{}: {}: {summary}",
                        v.sizes_text(),
                        category.as_str()
                    )),
                    _ => None,
                })
                .unwrap_or_default();
            let more = if *failed > 1 {
                format!(" (wrong on {failed} of {checked} unseen shapes)")
            } else {
                format!(" (wrong on 1 of {checked} unseen shapes)")
            };
            format!("wrong on {first}{more}")
        }
        ShapeVerdict::NotVariable { why } => format!("shapes not varied: {why}"),
        ShapeVerdict::NotRun { why } => format!("shape check not run: {why}"),
    }
}

#[cfg(test)]
mod tests;
