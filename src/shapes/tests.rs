use super::check;
use super::*;
use crate::protocol::{Category, EvalResult};

const GEMM: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, A, B):\n        return torch.matmul(A, B)\n\nM = 1024\nK = 4096\nN = 2048  # columns\n\ndef get_inputs():\n    return [torch.randn(M, K), torch.randn(K, N)]\n\ndef get_init_inputs():\n    return []\n";

const CONV: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0):\n        super().__init__()\n        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)\n    def forward(self, x):\n        return self.conv(x)\n\nbatch_size = 16\nin_channels = 3\nout_channels = 64\nkernel_size = 3\nstride = 1\npadding = 1\nwidth = 256\nheight = 128\n\ndef get_inputs():\n    return [torch.randn(batch_size, in_channels, height, width)]\n\ndef get_init_inputs():\n    return [in_channels, out_channels, kernel_size, stride, padding]\n";

const SOFTMAX: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n\nbatch_size = 16\ndim = 16384\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim)]\n\ndef get_init_inputs():\n    return []\n";

const REDUCTION: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n        self.dim = dim\n    def forward(self, x):\n        return torch.sum(x, dim=self.dim, keepdim=True)\n\nbatch_size = 16\ndim1 = 256\ndim2 = 256\nreduce_dim = 1\n\ndef get_inputs():\n    return [torch.randn(batch_size, dim1, dim2)]\n\ndef get_init_inputs():\n    return [reduce_dim]\n";

const NO_CONSTANTS: &str = "import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\ndef get_inputs():\n    return [torch.randn(16, 16384)]\n\ndef get_init_inputs():\n    return []\n";

fn variable(
    source: &str,
) -> (
    BTreeMap<String, u64>,
    BTreeMap<String, String>,
    Vec<Variant>,
) {
    match derive(source) {
        Derivation::Variable {
            original,
            kept,
            variants,
        } => (original, kept, variants),
        Derivation::NotVariable { why } => panic!("expected variants, got: {why}"),
    }
}

fn sizes(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

#[test]
fn a_gemm_varies_m_n_k_with_odd_sizes_and_keeps_the_rest_of_the_text() {
    let (original, kept, variants) = variable(GEMM);
    assert_eq!(original, sizes(&[("K", 4096), ("M", 1024), ("N", 2048)]));
    assert!(kept.is_empty());
    let rules: Vec<_> = variants.iter().map(|v| v.rule).collect();
    // No batch-like name: no batch-of-1 variant.
    assert_eq!(
        rules,
        vec![
            VariantRule::Half,
            VariantRule::OddQuarter,
            VariantRule::OddThreeQuarters,
            VariantRule::OddFiveQuarters
        ]
    );
    let expected = [
        [("K", 2048), ("M", 512), ("N", 1024)],
        [("K", 1025), ("M", 257), ("N", 513)],
        [("K", 3073), ("M", 769), ("N", 1537)],
        [("K", 5121), ("M", 1281), ("N", 2561)],
    ];
    for (variant, want) in variants.iter().zip(expected) {
        assert_eq!(variant.sizes, sizes(&want), "{:?}", variant.rule);
    }
    for v in &variants[1..] {
        assert!(v.sizes.values().all(|s| s % 8 != 0), "{:?}", v.sizes);
    }
    // Only the three literals changed; the comment and everything else stay.
    let expected = GEMM
        .replace("M = 1024", "M = 769")
        .replace("K = 4096", "K = 3073")
        .replace("N = 2048  # columns", "N = 1537  # columns");
    assert_eq!(variants[2].source, expected);
}

#[test]
fn a_conv_keeps_kernel_size_stride_padding_and_small_channel_counts() {
    let (original, kept, variants) = variable(CONV);
    assert_eq!(
        original,
        sizes(&[
            ("batch_size", 16),
            ("height", 128),
            ("out_channels", 64),
            ("width", 256)
        ])
    );
    assert!(kept["kernel_size"].contains("structural"));
    assert!(kept["stride"].contains("structural"));
    assert!(kept["padding"].contains("structural"));
    assert!(kept["in_channels"].contains("below 8"));
    let batch_one = variants
        .iter()
        .find(|v| v.rule == VariantRule::BatchOne)
        .expect("a batch-of-1 variant");
    assert_eq!(
        batch_one.sizes,
        sizes(&[
            ("batch_size", 1),
            ("height", 128),
            ("out_channels", 64),
            ("width", 256)
        ])
    );
    assert!(batch_one.source.contains("\nbatch_size = 1\n"));
    assert!(batch_one.source.contains("\nkernel_size = 3\n"));
    assert_eq!(variants.len(), 5);
}

#[test]
fn softmax_varies_batch_size_and_dim() {
    let (original, _, variants) = variable(SOFTMAX);
    assert_eq!(original, sizes(&[("batch_size", 16), ("dim", 16384)]));
    assert_eq!(
        variants[2].sizes,
        sizes(&[("batch_size", 13), ("dim", 12289)])
    );
    assert!(
        variants[2]
            .source
            .contains("\nbatch_size = 13\ndim = 12289\n")
    );
    // The `dim=1` of the softmax call is an argument, not a constant: untouched.
    assert!(variants[2].source.contains("torch.softmax(x, dim=1)"));
}

#[test]
fn a_reductions_axis_is_never_varied() {
    let (original, kept, variants) = variable(REDUCTION);
    assert!(!original.contains_key("reduce_dim"));
    assert!(kept["reduce_dim"].contains("axis"));
    assert!(
        variants
            .iter()
            .all(|v| v.source.contains("\nreduce_dim = 1\n"))
    );
    // `dim = 1` as a plain name is kept by the size rule.
    let plain = REDUCTION.replace("reduce_dim", "dim");
    let (original, kept, _) = variable(&plain);
    assert!(!original.contains_key("dim"));
    assert!(kept["dim"].contains("below 8"));
}

#[test]
fn a_task_without_constants_says_so() {
    match derive(NO_CONSTANTS) {
        Derivation::NotVariable { why } => {
            assert!(why.contains("module-level integer constants"), "{why}")
        }
        other => panic!("expected NotVariable, got {other:?}"),
    }
    // Constants that are all structural: named.
    let only_structural =
        NO_CONSTANTS.replace("def get_inputs", "kernel_size = 3\n\ndef get_inputs");
    match derive(&only_structural) {
        Derivation::NotVariable { why } => assert!(why.contains("kernel_size"), "{why}"),
        other => panic!("expected NotVariable, got {other:?}"),
    }
}

#[test]
fn reassigned_indented_and_computed_constants_are_not_sizes() {
    let src = "x = 64\nx = 128\ny = 2 * 64\nz: int = 96\nif True:\n    w = 512\nclass Model:\n    size = 1024\n";
    let names: Vec<_> = constants(src).into_iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["z"]);
    let (_, _, variants) = variable(src);
    assert!(variants[0].source.contains("z: int = 48\n"));
}

fn result(correct: bool, category: Option<Category>, summary: &str) -> EvalResult {
    EvalResult {
        correct,
        category,
        summary: summary.into(),
        ..Default::default()
    }
}

#[test]
fn outcomes_skip_the_tasks_faults_and_name_the_kernels() {
    assert_eq!(
        check::outcome(&result(true, None, "")),
        VariantOutcome::Correct
    );
    assert!(matches!(
        check::outcome(&result(false, Some(Category::Task), "reference raised")),
        VariantOutcome::Skipped { why } if why.contains("reference fails")
    ));
    let mut oom = result(false, Some(Category::Oom), "needs 90 GB");
    oom.details = serde_json::json!({"kernel_loaded": false});
    assert!(matches!(
        check::outcome(&oom),
        VariantOutcome::Skipped { why } if why.starts_with("does not fit")
    ));
    // The kernel's own oom is the kernel's.
    oom.details = serde_json::json!({"kernel_loaded": true});
    assert!(matches!(
        check::outcome(&oom),
        VariantOutcome::Wrong {
            category: Category::Oom,
            ..
        }
    ));
    assert_eq!(
        check::outcome(&result(
            false,
            Some(Category::Mismatch),
            "out: 3 of 9 elements\nmore"
        )),
        VariantOutcome::Wrong {
            category: Category::Mismatch,
            summary: "out: 3 of 9 elements".into()
        }
    );
}

fn evaluated(rule: VariantRule, pairs: &[(&str, u64)], outcome: VariantOutcome) -> VariantCheck {
    VariantCheck {
        rule,
        sizes: sizes(pairs),
        seed: 43,
        outcome,
    }
}

#[test]
fn the_line_says_how_many_shapes_pass_or_which_fails_and_how() {
    let base = check::not_run(String::new());
    let pass = check::finish(ShapeCheck {
        variants: vec![
            evaluated(VariantRule::Half, &[("dim", 8)], VariantOutcome::Correct),
            evaluated(
                VariantRule::OddQuarter,
                &[("dim", 5)],
                VariantOutcome::Correct,
            ),
        ],
        ..base.clone()
    });
    assert_eq!(
        pass.verdict,
        ShapeVerdict::Generalizes {
            passed: 2,
            checked: 2
        }
    );
    assert_eq!(pass.line, "correct on 2 of 2 unseen shapes");
    assert_eq!(pass.verdict.mark(), "2/2");
    let fail = check::finish(ShapeCheck {
        variants: vec![
            evaluated(
                VariantRule::Half,
                &[("batch_size", 8), ("dim", 8192)],
                VariantOutcome::Correct,
            ),
            evaluated(
                VariantRule::OddThreeQuarters,
                &[("batch_size", 13), ("dim", 12289)],
                VariantOutcome::Wrong {
                    category: Category::Mismatch,
                    summary: "max abs err 0.41".into(),
                },
            ),
            evaluated(
                VariantRule::OddFiveQuarters,
                &[("batch_size", 21), ("dim", 20481)],
                VariantOutcome::Skipped {
                    why: "does not fit".into(),
                },
            ),
        ],
        ..base.clone()
    });
    assert_eq!(
        fail.verdict,
        ShapeVerdict::FailsOn {
            failed: 1,
            checked: 2
        }
    );
    assert_eq!(
        fail.line,
        "wrong on batch_size=13, dim=12289: mismatch: max abs err 0.41 (wrong on 1 of 2 unseen shapes)"
    );
    assert!(fail.fails());
    assert_eq!(fail.verdict.mark(), "FAIL 1/2");
    let skipped = check::finish(ShapeCheck {
        variants: vec![evaluated(
            VariantRule::Half,
            &[("dim", 8)],
            VariantOutcome::Skipped {
                why: "does not fit".into(),
            },
        )],
        ..base
    });
    assert!(matches!(skipped.verdict, ShapeVerdict::NotRun { .. }));
    assert!(
        skipped.line.contains("every variant was skipped"),
        "{}",
        skipped.line
    );
}

#[test]
fn the_check_evaluates_each_variant_for_correctness_with_its_own_seed() {
    let dir = tempfile::tempdir().unwrap();
    let settings = crate::config::EvalConfig::default();
    let seen = std::sync::Mutex::new(Vec::new());
    let check = futures::executor::block_on(check::check_kernel(
        SOFTMAX,
        std::path::Path::new("kernel.py"),
        dir.path(),
        crate::eval::Device::Cpu,
        &settings,
        &|request: crate::eval::EvalRequest| {
            let source = std::fs::read_to_string(&request.task).unwrap();
            seen.lock()
                .unwrap()
                .push((request.timing, request.settings.seed));
            // A kernel that only handles dim = 16384 and its half.
            let ok = source.contains("dim = 16384") || source.contains("dim = 8192");
            Box::pin(std::future::ready(Ok(result(
                ok,
                (!ok).then_some(Category::Mismatch),
                "max abs err 0.41",
            ))))
        },
    ))
    .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|(timing, _)| !timing));
    let seeds: Vec<_> = seen.iter().map(|(_, s)| *s).collect();
    assert_eq!(seeds, vec![43, 44, 45, 46, 47]);
    assert_eq!(
        check.verdict,
        ShapeVerdict::FailsOn {
            failed: 3,
            checked: 5
        }
    );
    assert!(
        check
            .line
            .starts_with("wrong on batch_size=5, dim=4097: mismatch"),
        "{}",
        check.line
    );
    // The batch-of-1 variant keeps dim at the task's size: the kernel passes it.
    assert_eq!(check.variants[4].outcome, VariantOutcome::Correct);
    let not_variable = futures::executor::block_on(check::check_kernel(
        NO_CONSTANTS,
        std::path::Path::new("kernel.py"),
        dir.path(),
        crate::eval::Device::Cpu,
        &settings,
        &|_| panic!("nothing to evaluate"),
    ))
    .unwrap();
    assert!(matches!(
        not_variable.verdict,
        ShapeVerdict::NotVariable { .. }
    ));
    assert!(
        not_variable
            .line
            .starts_with("shapes not varied: the task sets no sizes")
    );
}
