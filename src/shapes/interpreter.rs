//! Task sizes for Triton's interpreter (issue 38): on the CPU a kernel's programs run one
//! after another in Python, so a task sized for a GPU (`batch_size = 4096`, `dim = 5120`)
//! takes minutes per correctness trial. Before a CPU evaluation kforge shrinks the task's
//! sizes (the constants `--shapes` varies, `super::role`) by one factor until the product
//! of the two largest (the plane a tensor of the task spans at least: `batch_size x dim`
//! of an elementwise task, `M x N` of a GEMM) is within `BUDGET`. The product of every size
//! would shrink a GEMM whose interpreter cost is small (256x512x256 runs in seconds); a
//! task's sizes that fit are its own. What a kernel may fairly rely on is kept: a power of two
//! stays a power of two, and a size keeps its power-of-two factor up to `MAX_ALIGN` (a
//! kernel whose block divides 5120 still divides the smaller size). Nothing else of the task
//! changes, no check is skipped, and the result records the sizes (`InterpreterSizes`).

use std::collections::BTreeMap;

use super::{Constant, MIN_SIZE, Role, constants, replace_literals, role};
use crate::protocol::shapes::InterpreterSizes;

/// The most the product of a task's two largest sizes may be on the interpreter: 2^18
/// elements (a 512x512 elementwise task, a 64x4096 softmax). The judge's correctness trials
/// grow with the size under the interpreter (a 512x1088 ReLU: 8-15 s of trials on a loaded
/// 2-core machine, 64x64: 0.7 s; docs/benchmarks.md, "Fast loop"): this keeps them to seconds.
pub const BUDGET: u64 = 1 << 18;

/// The largest power-of-two factor a shrunk size keeps.
const MAX_ALIGN: u64 = 64;

/// A task's source with its sizes shrunk, and the record of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrunk {
    pub source: String,
    pub sizes: InterpreterSizes,
}

/// The task shrunk to `budget`; None when its sizes already fit (or it sets none kforge
/// can change: its sizes are then the task's, and a slow evaluation says why).
pub fn shrink(source: &str, budget: u64) -> Option<Shrunk> {
    let sizes: Vec<Constant> = constants(source)
        .into_iter()
        .filter(|c| matches!(role(c), Role::Size))
        .collect();
    let mut values: Vec<f64> = sizes.iter().map(|c| c.value as f64).collect();
    values.sort_by(|a, b| b.total_cmp(a));
    let plane: f64 = values.iter().take(2).product();
    if sizes.is_empty() || plane <= budget as f64 {
        return None;
    }
    let factor = (budget as f64 / plane).powf(1.0 / values.len().min(2) as f64);
    let task: BTreeMap<String, u64> = sizes.iter().map(|c| (c.name.clone(), c.value)).collect();
    let evaluated: BTreeMap<String, u64> = sizes
        .iter()
        .map(|c| (c.name.clone(), shrunk_size(c.value, factor)))
        .collect();
    if evaluated == task {
        return None;
    }
    let source = replace_literals(source, &sizes, &evaluated)?;
    Some(Shrunk {
        source,
        sizes: InterpreterSizes {
            task,
            evaluated,
            budget,
        },
    })
}

/// `value` times `factor`, at least `MIN_SIZE` (below it a constant reads as an axis) and
/// at most `value`, a power of two where `value` is one, else a multiple of `value`'s
/// power-of-two factor (up to `MAX_ALIGN`).
fn shrunk_size(value: u64, factor: f64) -> u64 {
    let target = ((value as f64 * factor).floor() as u64).max(MIN_SIZE);
    if target >= value {
        return value;
    }
    let shrunk = if value.is_power_of_two() {
        1u64 << (63 - target.leading_zeros())
    } else {
        let align = (1u64 << value.trailing_zeros()).min(MAX_ALIGN);
        (target / align).max(1) * align
    };
    shrunk.clamp(MIN_SIZE.min(value), value)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RELU: &str = "import torch\n\nbatch_size = 4096\ndim = 5120\n\n\ndef get_inputs():\n    return [torch.rand(batch_size, dim)]\n";

    #[test]
    fn the_readme_relu_is_shrunk_within_the_budget_keeping_its_alignment() {
        let shrunk = shrink(RELU, BUDGET).expect("a 4096x5120 task is too large");
        let e = &shrunk.sizes.evaluated;
        assert!(e["batch_size"].is_power_of_two(), "{e:?}");
        assert_eq!(e["dim"] % 64, 0, "{e:?}");
        assert!(e["batch_size"] * e["dim"] <= BUDGET, "{e:?}");
        assert!(
            e["batch_size"] >= 256 && e["dim"] >= 512,
            "not shrunk further than needed: {e:?}"
        );
        assert_eq!(shrunk.sizes.task["batch_size"], 4096);
        assert!(
            shrunk
                .source
                .contains(&format!("batch_size = {}\n", e["batch_size"]))
        );
        assert!(shrunk.source.contains(&format!("dim = {}\n", e["dim"])));
        assert!(shrunk.source.contains("torch.rand(batch_size, dim)"));
        assert_eq!(
            shrunk.sizes.changes_text(),
            format!(
                "batch_size 4096 -> {}, dim 5120 -> {}",
                e["batch_size"], e["dim"]
            )
        );
    }

    #[test]
    fn a_task_within_the_budget_and_one_without_sizes_are_left_alone() {
        assert_eq!(shrink("batch_size = 16\ndim = 1024\n", BUDGET), None);
        // A GEMM's three sizes: its plane (512x256) fits, whatever its FLOPs.
        let gemm = "batch_size = 256\nin_features = 512\nout_features = 256\n";
        assert_eq!(shrink(gemm, BUDGET), None);
        assert_eq!(
            shrink(
                "def get_inputs():\n    return [torch.rand(4096, 5120)]\n",
                BUDGET
            ),
            None
        );
    }

    #[test]
    fn structural_constants_and_small_ones_are_kept() {
        let source = "batch_size = 128\nin_channels = 3\nout_channels = 64\nkernel_size = 3\nheight = 2048\nwidth = 2048\nstride = 2\n";
        let shrunk = shrink(source, BUDGET).expect("shrunk");
        assert!(shrunk.source.contains("in_channels = 3\n"));
        assert!(shrunk.source.contains("kernel_size = 3\n"));
        assert!(shrunk.source.contains("stride = 2\n"));
        assert!(!shrunk.sizes.task.contains_key("kernel_size"));
        let e = &shrunk.sizes.evaluated;
        assert!(e["height"] * e["width"] <= BUDGET, "{e:?}");
        for (name, v) in &shrunk.sizes.evaluated {
            assert!(
                *v >= MIN_SIZE && *v <= shrunk.sizes.task[name],
                "{name} = {v}"
            );
        }
    }

    #[test]
    fn an_odd_size_may_become_any_size_and_a_size_never_grows() {
        assert_eq!(shrunk_size(1000, 0.1), 96);
        assert_eq!(shrunk_size(4097, 0.1), 409);
        assert_eq!(shrunk_size(4096, 0.1), 256);
        assert_eq!(shrunk_size(12, 0.1), 8);
        assert_eq!(shrunk_size(9, 0.5), 8);
        assert_eq!(shrunk_size(100, 1.0), 100);
    }
}
