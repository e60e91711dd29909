//! Each seed's own direction (docs/prompts.md, "Seed directions"). Multi-seed generation is
//! the pipeline's main source of diversity, and N copies of one prompt give a deterministic
//! or low-temperature model N copies of one kernel. So each seed is asked for a distinct
//! algorithmic strategy, chosen from the task's family (read from the task source: recurrent,
//! convolution, matrix product, reduction, elementwise), and is told the other seeds'
//! directions so that it does something different.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::pysource;
use crate::pysource::task_reader::is_recurrent;

/// What kind of computation a task is, for choosing strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskFamily {
    /// `nn.GRU`, `nn.LSTM`, `nn.RNN` and their cells.
    Recurrent,
    /// `nn.Conv*d`, `F.conv*d`.
    Convolution,
    /// `nn.Linear`, `torch.matmul`, `bmm`, `@`, `einsum`.
    MatrixProduct,
    /// Softmax, norms, sums, means, maxima, scans, losses.
    Reduction,
    /// Everything else: one output element from the input elements at the same place.
    Elementwise,
}

impl TaskFamily {
    /// In words, for the prompt: `a reduction (softmax, norms, sums along a dimension)`.
    pub fn describe(self) -> &'static str {
        match self {
            TaskFamily::Recurrent => "a recurrence over time (RNN/GRU/LSTM)",
            TaskFamily::Convolution => "a convolution",
            TaskFamily::MatrixProduct => "a matrix product (with whatever follows it)",
            TaskFamily::Reduction => "a reduction along a dimension (softmax, norms, sums, maxima)",
            TaskFamily::Elementwise => "an elementwise computation",
        }
    }
}

static CONVOLUTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\b(?:nn\.Conv(?:Transpose)?[123]d|conv(?:_transpose)?[123]d)\s*\(")
        .expect("valid regex")
});
static MATRIX_PRODUCT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"\b(?:nn\.(?:Linear|Bilinear)|(?:torch|F)\.(?:matmul|mm|bmm|addmm|baddbmm|einsum|linear|bilinear))\s*\(|\.(?:matmul|mm|bmm)\s*\(|[\w)\]][ \t]*@[ \t]*[\w(]",
    )
    .expect("valid regex")
});
static REDUCTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)\b(?:log_?softmax|softmax|logsumexp|sum|mean|amax|amin|max|min|argmax|argmin|norm|normalize|layer_?norm|batch_?norm|group_?norm|instance_?norm|rms_?norm|cumsum|cumprod|var|std|prod|cross_entropy|nll_loss|\w*loss)\s*\(",
    )
    .expect("valid regex")
});

/// The task's family, read from the code of its source (comments and strings left out).
/// A task with several (a GEMM followed by a mean) is named by the heaviest part.
pub fn family(task_source: &str) -> TaskFamily {
    if is_recurrent(task_source) {
        return TaskFamily::Recurrent;
    }
    let code: String = pysource::logical_lines(task_source)
        .iter()
        .map(|l| l.code.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if CONVOLUTION.is_match(&code) {
        TaskFamily::Convolution
    } else if MATRIX_PRODUCT.is_match(&code) {
        TaskFamily::MatrixProduct
    } else if REDUCTION.is_match(&code) {
        TaskFamily::Reduction
    } else {
        TaskFamily::Elementwise
    }
}

/// A strategy a seed can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    /// Short, for events, the tree and logs: `row-per-program`.
    pub name: &'static str,
    /// What to build, for the prompt.
    pub text: &'static str,
}

const RECURRENT: &[Strategy] = &[
    Strategy {
        name: "persistent-hidden-tiles",
        text: "precompute the input-side projections of all time steps with one GEMM kernel, then run the whole time loop inside ONE persistent kernel whose grid covers the batch AND tiles of the hidden dimension; the programs exchange the hidden state through a small global buffer and wait for each other at every step (an atomic counter), so keep the grid no larger than the number of SMs.",
    },
    Strategy {
        name: "program-per-batch-row",
        text: "precompute the input-side projections of all time steps with one GEMM kernel, then one program per batch row (per layer in turn) keeps the whole hidden state in registers and loops over time inside the kernel: no synchronisation between programs; size the hidden blocks so one program holds them.",
    },
    Strategy {
        name: "fused-step-kernels",
        text: "precompute the input-side projections of all time steps with one GEMM kernel, then launch one fused kernel per time step (the hidden-side product, the gates and the state update in one launch, grid over batch and hidden tiles): the simplest to get right, one launch per step.",
    },
];

const CONVOLUTION_STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "implicit-gemm",
        text: "an implicit GEMM: treat the convolution as a matrix product of (batch x output positions) rows by output-channel columns with K = in_channels x kernel height x kernel width; compute each K step's input addresses on the fly (no unfolded copy), multiply BLOCK_M x BLOCK_K by BLOCK_K x BLOCK_N tiles with `tl.dot` accumulating in float32, and fuse what follows the convolution (bias, activation, clamp) into the store.",
    },
    Strategy {
        name: "direct-conv-tiles",
        text: "a direct convolution: one program per tile of output positions for a block of output channels, looping over the input channels and the kernel window, accumulating in float32 (a `tl.dot` over a block of input channels where the tiles are at least 16 wide), with what follows the convolution fused into the store.",
    },
    Strategy {
        name: "im2col-then-gemm",
        text: "two kernels: one unfolds the input patches (im2col) into a workspace of shape (batch x output positions, in_channels x kernel height x kernel width), the second is a tiled `tl.dot` GEMM of that workspace with the weights, with what follows the convolution fused into its store.",
    },
];

const MATRIX_PRODUCT_STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "fused-tile-gemm",
        text: "one fused kernel: one program per BLOCK_M x BLOCK_N output tile, a loop over K in BLOCK_K steps accumulating `tl.dot` in float32, and every step after the product (bias, activation, scaling, a reduction of the tile's rows) applied to the accumulator before the single store.",
    },
    Strategy {
        name: "grouped-autotuned-gemm",
        text: "a tiled GEMM with grouped program ordering (GROUP_M rows of tiles per group, so that neighbouring programs reuse the same input tiles from L2) and a small `@triton.autotune` over 3-4 tile shapes, `num_warps` and `num_stages` keyed on the sizes (grid from `lambda META`), with the epilogue fused.",
    },
    Strategy {
        name: "split-k-two-pass",
        text: "split the work along K or along the output: programs each reduce one slice of K for an output tile (or one tile of a following reduction) into a small float32 workspace, and a second small kernel combines the partial results and applies the epilogue; deterministic, no atomics; it pays off when M x N is small compared with K or when a reduction follows the product.",
    },
];

const REDUCTION_STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "row-per-program",
        text: "one program per row (per reduced slice): load the whole row into registers with BLOCK = `triton.next_power_of_2(n)` (masked), reduce and normalise in one pass, so every element is read once and written once.",
    },
    Strategy {
        name: "online-tiled",
        text: "loop over each row in fixed-size tiles (e.g. 1024-4096 elements) keeping running statistics (online softmax: a running maximum and a rescaled running sum; Welford for mean and variance), then a second loop over the tiles to write the outputs: any row length fits in bounded registers.",
    },
    Strategy {
        name: "multi-row-blocks",
        text: "several rows per program: a 2-D block of ROWS x BLOCK elements reduced along axis 1, ROWS chosen from the row length so that each program handles a few thousand elements, which keeps short rows efficient.",
    },
    Strategy {
        name: "split-row-two-pass",
        text: "split each long row across several programs: a first kernel reduces chunks of a row to partial statistics in a small float32 workspace, a second combines them and writes the outputs; for few, very long rows, where one program per row leaves most of the GPU idle.",
    },
];

const ELEMENTWISE_STRATEGIES: &[Strategy] = &[
    Strategy {
        name: "flat-1d-blocks",
        text: "treat the tensor as one contiguous array: one program per BLOCK (1024-4096) elements with masked, vectorisable loads and `num_warps` 4-8; any per-channel or per-column operand is indexed from the element's flat offset.",
    },
    Strategy {
        name: "row-tiles-2d",
        text: "2-D tiles that follow the tensor's layout: one program per (row block, column block), with per-row or per-column operands loaded once per tile and broadcast across it.",
    },
    Strategy {
        name: "grid-stride-persistent",
        text: "a fixed grid of a few programs per SM, each looping over many blocks (`for start in range(pid * BLOCK, n, num_programs * BLOCK)`), so that few programs stream the whole tensor.",
    },
];

/// The strategies of a family, in the order seeds take them.
pub fn strategies(family: TaskFamily) -> &'static [Strategy] {
    match family {
        TaskFamily::Recurrent => RECURRENT,
        TaskFamily::Convolution => CONVOLUTION_STRATEGIES,
        TaskFamily::MatrixProduct => MATRIX_PRODUCT_STRATEGIES,
        TaskFamily::Reduction => REDUCTION_STRATEGIES,
        TaskFamily::Elementwise => ELEMENTWISE_STRATEGIES,
    }
}

/// A seed's direction, as its prompt states it and the session records it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeedDirection {
    /// 1-based seed index, and how many seeds the session has.
    pub seed: u32,
    pub seeds: u32,
    /// The task's family in words.
    pub family: String,
    /// Short name: `row-per-program`, or `row-per-program, variant 2` past the list.
    pub name: String,
    /// What to build.
    pub text: String,
    /// The other seeds' directions, `seed 2: online-tiled`, so that this one differs.
    pub others: Vec<String>,
}

/// The strategy of seed `seed` (1-based): the family's strategies in turn; past the end of
/// the list they come round again as variants that must differ in tiling and launch
/// parameters from the earlier seed of the same strategy.
fn strategy_of(family: TaskFamily, seed: u32) -> (String, String) {
    let list = strategies(family);
    let k = (seed.max(1) - 1) as usize;
    let s = list[k % list.len()];
    let round = k / list.len();
    if round == 0 {
        (s.name.to_string(), s.text.to_string())
    } else {
        let earlier = k % list.len() + 1;
        (
            format!("{}, variant {}", s.name, round + 1),
            format!(
                "{} Seed {earlier} takes this strategy too: choose clearly different tile shapes, program mapping and `num_warps` from what it would.",
                s.text
            ),
        )
    }
}

/// The direction of seed `seed` of `seeds` for the task.
pub fn seed_direction(task_source: &str, seed: u32, seeds: u32) -> SeedDirection {
    let family = family(task_source);
    let (name, text) = strategy_of(family, seed);
    let others = (1..=seeds.max(seed))
        .filter(|&s| s != seed)
        .map(|s| format!("seed {s}: {}", strategy_of(family, s).0))
        .collect();
    SeedDirection {
        seed,
        seeds: seeds.max(seed),
        family: family.describe().to_string(),
        name,
        text,
        others,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOFTMAX: &str = include_str!("../../examples/tasks/softmax.py");
    const RELU: &str = include_str!("../../examples/tasks/relu.py");
    const GRU: &str = include_str!("../../examples/tasks/gru_hidden.py");

    fn task(body: &str) -> String {
        format!(
            "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{body}\n"
        )
    }

    #[test]
    fn the_family_is_read_from_the_code() {
        assert_eq!(family(SOFTMAX), TaskFamily::Reduction);
        assert_eq!(family(RELU), TaskFamily::Elementwise);
        assert_eq!(family(GRU), TaskFamily::Recurrent);
        let gemm = task(
            "        self.linear = nn.Linear(8, 8)\n    def forward(self, x):\n        x = self.linear(x)\n        return torch.nn.functional.gelu(x).mean(dim=1)",
        );
        assert_eq!(family(&gemm), TaskFamily::MatrixProduct);
        let conv = task(
            "        self.conv = nn.Conv2d(3, 8, 3)\n    def forward(self, x):\n        return torch.clamp(self.conv(x), -1, 1)",
        );
        assert_eq!(family(&conv), TaskFamily::Convolution);
        assert_eq!(
            family(&task("    def forward(self, a, b):\n        return a @ b")),
            TaskFamily::MatrixProduct
        );
        // A word in a comment or a docstring is not code.
        let commented = task(
            "    def forward(self, x):\n        \"\"\"not a softmax( or a matmul(\"\"\"\n        return x * 2  # sum(",
        );
        assert_eq!(family(&commented), TaskFamily::Elementwise);
    }

    #[test]
    fn every_seed_of_a_session_gets_its_own_direction_and_knows_the_others() {
        for seeds in 1..=7 {
            let all: Vec<SeedDirection> = (1..=seeds)
                .map(|s| seed_direction(SOFTMAX, s, seeds))
                .collect();
            for (i, d) in all.iter().enumerate() {
                assert_eq!(d.others.len(), seeds as usize - 1);
                for (j, e) in all.iter().enumerate() {
                    if i != j {
                        assert_ne!((&d.name, &d.text), (&e.name, &e.text), "{seeds} seeds");
                        assert!(d.others.contains(&format!("seed {}: {}", e.seed, e.name)));
                    }
                }
            }
        }
        let d = seed_direction(SOFTMAX, 5, 5);
        assert_eq!(d.name, "row-per-program, variant 2");
        assert!(d.text.contains("Seed 1 takes this strategy too"));
    }

    #[test]
    fn every_family_has_at_least_three_strategies_with_distinct_names() {
        for f in [
            TaskFamily::Recurrent,
            TaskFamily::Convolution,
            TaskFamily::MatrixProduct,
            TaskFamily::Reduction,
            TaskFamily::Elementwise,
        ] {
            let list = strategies(f);
            assert!(list.len() >= 3, "{f:?}");
            let names: std::collections::BTreeSet<_> = list.iter().map(|s| s.name).collect();
            assert_eq!(names.len(), list.len(), "{f:?}");
        }
    }
}
