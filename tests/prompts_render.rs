//! Rendering every prompt template, overrides, hot reload, snapshots and template errors.

use std::path::Path;
use std::time::Duration;

use kforge::llm::extract::Analysis;
use kforge::prompts::{
    AttemptFailure, DEFAULT_TEMPLATES, PromptContext, PromptSet, SNAPSHOT_SOURCES_FILE,
    TemplateName,
};
use kforge::protocol::{Category, EvalResult, Timing, TimingStats};

const GRU_TASK: &str = include_str!("../examples/tasks/gru_hidden.py");
const RELU_TASK: &str = include_str!("../examples/tasks/relu.py");
const RELU_KERNEL: &str = include_str!("../examples/kernels/relu_triton.py");

fn failed(category: Category, summary: &str, message: &str) -> EvalResult {
    EvalResult {
        category: Some(category),
        summary: summary.into(),
        message: message.into(),
        ..Default::default()
    }
}

fn correct(kernel_ms: f64, reference_ms: f64, profile: Option<serde_json::Value>) -> EvalResult {
    EvalResult {
        correct: true,
        timing: Some(Timing {
            meaningful: true,
            kernel: TimingStats {
                median_ms: kernel_ms,
                ..Default::default()
            },
            reference: TimingStats {
                median_ms: reference_ms,
                ..Default::default()
            },
            score: Some(reference_ms / kernel_ms),
            ..Default::default()
        }),
        profile,
        ..Default::default()
    }
}

fn full_context() -> PromptContext {
    let mut ctx = PromptContext::for_task("40_GRUHidden", GRU_TASK).with_eval(&correct(
        8.0,
        42.2,
        Some(serde_json::json!({
            "available": true,
            "kernels": [{"name": "gru_seq_kernel", "metrics": {"launch__grid_size": 8.0,
                "sm__warps_active.avg.pct_of_peak_sustained_active": 3.1}}]
        })),
    ));
    ctx.kernel_source = Some("class ModelNew(nn.Module):\n    pass\n".into());
    ctx.analysis = Some(Analysis {
        worth_optimizing: Some(true),
        reason: Some("the grid covers the batch only".into()),
        bottleneck: Some("8 programs on 132 SMs".into()),
        optimization_method: Some("grid over batch and hidden tiles".into()),
        modification_plan: Some("precompute x @ W_ih.T; one persistent kernel".into()),
        expected_speedup: Some("3x".into()),
        output_requirement: Some("only h_n".into()),
        raw: serde_json::json!({}),
    });
    ctx.stage = Some("block_tiling".into());
    ctx.instruction = Some("use BLOCK_H = 64".into());
    ctx.device = Some("NVIDIA H200".into());
    ctx
}

/// Whether two blank lines follow each other outside fenced code.
fn blank_runs_outside_code(text: &str) -> bool {
    let (mut in_fence, mut blank) = (false, 0);
    for line in text.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
        }
        blank = if line.trim().is_empty() && !in_fence {
            blank + 1
        } else {
            0
        };
        if blank > 1 {
            return true;
        }
    }
    false
}

#[test]
fn every_template_renders_with_an_empty_and_a_full_context() {
    let set = PromptSet::new(None).unwrap();
    let empty = PromptContext::default();
    set.check(&empty).unwrap();
    set.check(&full_context()).unwrap();
    for name in TemplateName::ALL {
        let p = set.render(name, &full_context()).unwrap();
        assert!(p.system.contains("expert GPU kernel engineer"), "{name}");
        assert!(!p.system.contains("{{") && !p.user.contains("{{"), "{name}");
        assert!(
            !blank_runs_outside_code(&p.user),
            "{name}: runs of blank lines"
        );
        if name != TemplateName::System {
            assert!(p.user.contains("forward"), "{name}");
        }
    }
}

#[test]
fn seed_prompt_teaches_the_rules_the_format_an_example_and_what_forward_returns() {
    let set = PromptSet::new(None).unwrap();
    let p = set
        .render(
            TemplateName::Seed,
            &PromptContext::for_task("40_GRUHidden", GRU_TASK),
        )
        .unwrap();
    let u = &p.user;
    for needle in [
        "@triton.jit",
        "triton.cdiv",
        "power of two",
        "tl.constexpr",
        "tl.where",
        "mask",
        "tl.tanh` may not exist",
        "tl.exp",
        "fp32",
        "at least 16",
        "same names, shapes and creation order",
        "class ModelNew(nn.Module)",
        "ONE fenced ```python block",
        "No try/except",
        "no threads",
        "No PyTorch compute ops",
        "silu_bias_kernel",
        "`h_n`: element [1] of what `self.gru(x)` returns",
        "This task is recurrent",
        "class Model(nn.Module):",
    ] {
        assert!(
            u.to_lowercase().contains(&needle.to_lowercase()),
            "seed prompt lacks {needle:?}"
        );
    }
    let relu = set
        .render(
            TemplateName::Seed,
            &PromptContext::for_task("19_ReLU", RELU_TASK),
        )
        .unwrap();
    assert!(!relu.user.contains("This task is recurrent"));
}

#[test]
fn repair_prompt_carries_error_code_reference_hints_and_history() {
    let set = PromptSet::new(None).unwrap();
    let mut ctx = PromptContext::for_task("19_ReLU", RELU_TASK).with_eval(&failed(
        Category::OutOfResources,
        "out of resources: shared memory requires 262144, the limit is 232448",
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448",
    ));
    ctx.kernel_source = Some(RELU_KERNEL.into());
    ctx.attempts = vec![
        AttemptFailure::from_eval(
            1,
            &failed(
                Category::Compile,
                "Triton compile error: tanh",
                "line\n".repeat(30).as_str(),
            ),
        ),
        AttemptFailure {
            attempt: 2,
            category: "mismatch".into(),
            summary: "trial 1: output: max abs error 0.5".into(),
            message: String::new(),
        },
    ];
    let p = set.render(TemplateName::Repair, &ctx).unwrap();
    let u = &p.user;
    assert!(u.contains("## The failure: `out_of_resources`"), "{u}");
    assert!(u.contains("Hardware limit: 232448"));
    assert!(u.contains("def relu_kernel"), "failing code");
    assert!(u.contains("def get_inputs"), "reference");
    assert!(u.contains("lower `num_stages`"), "hint");
    assert!(u.contains("- Attempt 1: `compile`: Triton compile error: tanh"));
    assert!(u.contains("[... 22 earlier lines left out ...]"), "{u}");
    assert!(u.contains("- Attempt 2: `mismatch`: trial 1: output: max abs error 0.5"));
}

#[test]
fn analysis_prompt_asks_for_the_exact_json_keys_with_latency_and_metrics() {
    let set = PromptSet::new(None).unwrap();
    let p = set.render(TemplateName::Analysis, &full_context()).unwrap();
    for key in [
        "\"worth_optimizing\"",
        "\"reason\"",
        "\"bottleneck\"",
        "\"optimisation_method\"",
        "\"modification_plan\"",
        "\"expected_speedup\"",
        "\"output_requirement\"",
    ] {
        assert!(p.user.contains(key), "{key}");
    }
    assert!(
        p.user.contains("8.000 ms for this kernel vs 42.200 ms"),
        "{}",
        p.user
    );
    assert!(
        p.user
            .contains("grid size (blocks) (`launch__grid_size`): 8")
    );
    assert!(p.user.contains("achieved occupancy"));

    let mut cpu = full_context();
    cpu.timing = Default::default();
    cpu.metrics.clear();
    let p = set.render(TemplateName::Analysis, &cpu).unwrap();
    assert!(p.user.contains("Latency: not measured"), "{}", p.user);
    assert!(p.user.contains("Nothing is timed in this run (no GPU)"));
}

#[test]
fn optimize_prompt_has_analysis_reference_and_recurrent_guidance() {
    let set = PromptSet::new(None).unwrap();
    let p = set
        .render(TemplateName::OptimizeFromAnalysis, &full_context())
        .unwrap();
    let u = &p.user;
    assert!(u.contains("Output requirement: only h_n"));
    assert!(u.contains("Plan: precompute x @ W_ih.T; one persistent kernel"));
    assert!(u.contains("self.gru = nn.GRU"), "reference included");
    assert!(u.contains("ONE large GEMM"));
    assert!(u.contains("inside* ONE persistent kernel"));
    assert!(u.contains("batch AND over tiles of the hidden dimension"));
    assert!(u.contains("0.25x"));
}

#[test]
fn stage_prompts_keep_their_theme_and_use_metrics() {
    let set = PromptSet::new(None).unwrap();
    for (stage, needle) in [
        ("grid_and_parallel", "the launch grid and parallelism"),
        ("block_tiling", "block sizes and tiling"),
        ("memory_and_tuning", "memory access and final tuning"),
    ] {
        let mut ctx = full_context();
        ctx.stage = Some(stage.into());
        let p = set
            .render(TemplateName::stage(stage).unwrap(), &ctx)
            .unwrap();
        assert!(
            p.user.contains(&format!("## This tuning stage: `{stage}`")),
            "{stage}"
        );
        assert!(p.user.contains(needle), "{stage}");
        assert!(p.user.contains("Use the metrics"), "{stage}");
        ctx.metrics.clear();
        let p = set
            .render(TemplateName::stage(stage).unwrap(), &ctx)
            .unwrap();
        assert!(!p.user.contains("Use the metrics"), "{stage}");
    }
}

#[test]
fn instructed_prompt_repairs_or_optimizes_with_the_instruction() {
    let set = PromptSet::new(None).unwrap();
    let p = set
        .render(TemplateName::Instructed, &full_context())
        .unwrap();
    assert!(
        p.user
            .contains("## Your task\nImprove the Triton implementation"),
        "{}",
        p.user
    );
    assert!(p.user.contains("use BLOCK_H = 64"));
    let broken = full_context().with_eval(&failed(
        Category::CudaError,
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "",
    ));
    let p = set.render(TemplateName::Instructed, &broken).unwrap();
    assert!(
        p.user
            .contains("## Your task\nRepair the Triton implementation")
    );
    assert!(p.user.contains("int64"), "hints for the failure");
}

fn wait_for_new_mtime() {
    // Modification times can be coarse: make sure a rewrite is seen as a change.
    std::thread::sleep(Duration::from_millis(20));
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

#[test]
fn overrides_are_per_file_and_hot_reloaded() {
    let dir = tempfile::tempdir().unwrap();
    let set = PromptSet::new(Some(dir.path().to_path_buf())).unwrap();
    let ctx = PromptContext::for_task("19_ReLU", RELU_TASK);
    // No override yet: the built-in text.
    assert!(
        set.render(TemplateName::Seed, &ctx)
            .unwrap()
            .user
            .contains("worked example")
    );

    // A new override is picked up without a new PromptSet; other files stay built in.
    write(dir.path(), "seed.j2", "SEED v1 for {{ task_name }}");
    let p = set.render(TemplateName::Seed, &ctx).unwrap();
    assert_eq!(p.user, "SEED v1 for 19_ReLU\n");
    assert!(p.system.contains("expert GPU kernel engineer"));

    // An edit is picked up at the next render (a clone shares the templates).
    wait_for_new_mtime();
    write(
        dir.path(),
        "seed.j2",
        "SEED v2, a longer text: {{ forward_returns }}",
    );
    let clone = set.clone();
    let p = clone.render(TemplateName::Seed, &ctx).unwrap();
    assert!(
        p.user.starts_with("SEED v2, a longer text: a single value"),
        "{}",
        p.user
    );

    // A partial override changes every template that includes it.
    write(dir.path(), "_rules.j2", "CUSTOM RULES");
    let p = set.render(TemplateName::Repair, &ctx).unwrap();
    assert!(p.user.contains("CUSTOM RULES") && !p.user.contains("Triton rules"));

    // Removing the override brings the default back.
    std::fs::remove_file(dir.path().join("seed.j2")).unwrap();
    assert!(
        set.render(TemplateName::Seed, &ctx)
            .unwrap()
            .user
            .contains("CUSTOM RULES")
    );
}

fn render_error(set: &PromptSet, name: TemplateName) -> String {
    format!(
        "{:#}",
        set.render(name, &PromptContext::default()).unwrap_err()
    )
}

#[test]
fn template_errors_name_the_file_its_origin_and_the_line() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "repair.j2",
        "line one\n{% if failure %}\nunclosed\n",
    );
    let set = PromptSet::new(Some(dir.path().to_path_buf())).unwrap();
    let err = render_error(&set, TemplateName::Repair);
    assert!(err.contains("`repair.j2`"), "{err}");
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("syntax error"), "{err}");

    // A misspelt variable is an error (strict undefined), not silently empty.
    write(dir.path(), "analysis.j2", "ok\n{{ kernel_sauce }}\n");
    let err = render_error(&set, TemplateName::Analysis);
    assert!(
        err.contains("`analysis.j2`") && err.contains("line 2"),
        "{err}"
    );
    assert!(err.contains("undefined"), "{err}");

    // An error in an included partial names the partial and the including template.
    write(dir.path(), "_kernel.j2", "{{ nope.x }}");
    let err = render_error(&set, TemplateName::Instructed);
    assert!(
        err.contains("`_kernel.j2`") && err.contains("while rendering `instructed.j2`"),
        "{err}"
    );

    let missing = PromptSet::new(Some(dir.path().join("nope")));
    assert!(format!("{:#}", missing.unwrap_err()).contains("does not exist"));
}

#[test]
fn snapshot_writes_the_templates_in_effect_and_their_sources() {
    let user = tempfile::tempdir().unwrap();
    write(user.path(), "seed.j2", "MY SEED {% include \"_mine.j2\" %}");
    write(user.path(), "_mine.j2", "PARTIAL");
    let set = PromptSet::new(Some(user.path().to_path_buf())).unwrap();
    let session = tempfile::tempdir().unwrap();
    let dir = session.path().join("prompts");
    set.snapshot_into(&dir).unwrap();
    for (name, text) in DEFAULT_TEMPLATES {
        let written = std::fs::read_to_string(dir.join(name)).unwrap();
        if *name == "seed.j2" {
            assert_eq!(written, "MY SEED {% include \"_mine.j2\" %}");
        } else {
            assert_eq!(&written, text, "{name}");
        }
    }
    assert_eq!(
        std::fs::read_to_string(dir.join("_mine.j2")).unwrap(),
        "PARTIAL"
    );
    let sources: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(SNAPSHOT_SOURCES_FILE)).unwrap())
            .unwrap();
    assert_eq!(sources["repair.j2"], "built-in");
    assert!(sources["seed.j2"].as_str().unwrap().ends_with("seed.j2"));

    // The snapshot reproduces the same prompts when used as the user directory.
    let replay = PromptSet::new(Some(dir.clone())).unwrap();
    let ctx = full_context();
    for name in TemplateName::ALL {
        assert_eq!(
            replay.render(name, &ctx).unwrap(),
            set.render(name, &ctx).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn shipped_prompts_dir_matches_the_embedded_defaults() {
    // `prompts/` in the repository is what `include_str!` embeds: a run from the repository
    // root (where `./prompts` is picked up as the override dir) changes nothing.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    for (name, text) in DEFAULT_TEMPLATES {
        assert_eq!(
            &std::fs::read_to_string(root.join(name)).unwrap(),
            text,
            "{name}"
        );
    }
    let files = std::fs::read_dir(&root).unwrap().count();
    assert_eq!(
        files,
        DEFAULT_TEMPLATES.len(),
        "every file in prompts/ is embedded"
    );
}

#[test]
#[ignore = "prints every rendered prompt for reading: cargo test --test prompts_render -- --ignored --nocapture"]
fn print_rendered_prompts() {
    let set = PromptSet::new(None).unwrap();
    for name in TemplateName::ALL {
        println!(
            "{}",
            set.render(name, &full_context()).unwrap().to_markdown()
        );
    }
}

#[test]
fn the_user_dir_comes_from_the_config_else_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let config_file = dir.path().join("kforge.toml");
    std::fs::write(
        &config_file,
        format!("[prompts]\ndir = \"{}\"\n", dir.path().display()),
    )
    .unwrap();
    let config = kforge::config::Config::load_files(&[], Some(&config_file)).unwrap();
    assert_eq!(
        kforge::prompts::user_dir(&config),
        Some(dir.path().to_path_buf())
    );
    let set = PromptSet::from_config(&config).unwrap();
    assert_eq!(set.user_dir(), Some(dir.path()));

    // Without `[prompts] dir`, `./prompts` is used when it exists: tests run in the
    // repository root, which has one.
    let plain = kforge::config::Config::load_files(&[], None).unwrap();
    assert_eq!(
        kforge::prompts::user_dir(&plain),
        Some(std::path::PathBuf::from("prompts"))
    );
}

/// Issue 36 (5): under the default `oracle` rule the prompts state the rule the judge
/// applies, in the figures the task check measured for this task's outputs (never a fixed
/// atol the judge does not use).
#[test]
fn prompts_state_the_oracle_rule_in_the_task_checks_numbers() {
    use kforge::config::Tolerance;
    use kforge::protocol::{PrecisionPolicy, ToleranceUsed};

    let set = PromptSet::new(None).unwrap();
    let measured: ToleranceUsed = serde_json::from_value(serde_json::json!({
        "mode": "oracle", "precision": "strict", "atol": null, "rtol": null, "effective_atol": {},
        "outputs": {"out": {"dtype": "float32", "rule": "oracle", "limit": 128.0, "error_ratio": 1.2,
                            "honest_rms": 3.0e-8, "max_allowed": 1.5e-5, "oracle": "float64 oracle"}},
        "oracle": {"kind": "float64", "rule": "r", "factor": {"float32": 128.0, "float16": 16.0,
                   "bfloat16": 16.0}, "twin": null, "twin_error": null, "reason": null, "seconds": 0.1}
    }))
    .unwrap();
    let ctx = PromptContext::for_task("23_Softmax", RELU_TASK)
        .with_precision(PrecisionPolicy::Strict, None, None)
        .with_tolerance(Tolerance::Oracle, Some(measured));
    for name in [TemplateName::Seed, TemplateName::Repair] {
        let u = set.render(name, &ctx).unwrap().user;
        assert!(
            u.contains(
                "within 128x (float16/bfloat16 outputs: 16x) the error honest arithmetic makes"
            ),
            "{name:?}: {u}"
        );
        assert!(
            u.contains("`out` (float32) may differ from the exact result by about +-3.84e-6 (128x its RMS honest \
                        error 3.00e-8), at most +-1.50e-5 at any element"),
            "{name:?}: {u}"
        );
        assert!(
            !u.contains("1e-4"),
            "no fixed atol the judge does not apply: {u}"
        );
    }
    // Without figures (no task check yet) the rule is stated without them.
    let bare =
        PromptContext::for_task("t", RELU_TASK).with_precision(PrecisionPolicy::Strict, None, None);
    let u = set.render(TemplateName::Seed, &bare).unwrap().user;
    assert!(u.contains("within 128x") && !u.contains("1e-4"), "{u}");
}

/// Issue 22: the code-writing prompts state the precision the kernel must keep, and a
/// mismatch of a kernel found computing in TF32 gets the fix as its first hint.
#[test]
fn prompts_state_the_precision_policy_and_repairs_name_the_tf32_fix() {
    use kforge::protocol::PrecisionPolicy;

    let set = PromptSet::new(None).unwrap();
    let strict = PromptContext::for_task("12_Gemm", RELU_TASK)
        .with_precision(PrecisionPolicy::Strict, None, None)
        .with_tolerance(kforge::config::Tolerance::Dtype, None)
        .with_kernel(Some(RELU_KERNEL.into()));
    let tf32 = strict
        .clone()
        .with_precision(PrecisionPolicy::Tf32, None, None);
    let mut analysed = strict.clone();
    analysed.analysis = full_context().analysis;
    for (name, ctx) in [
        (TemplateName::Seed, &strict),
        (TemplateName::Repair, &strict),
        (TemplateName::OptimizeFromAnalysis, &analysed),
    ] {
        let u = set.render(name, ctx).unwrap().user;
        assert!(
            u.contains("10. Precision: `precision = \"strict\"`"),
            "{name:?}: {u}"
        );
        assert!(u.contains("input_precision=\"ieee\""), "{name:?}");
        assert!(u.contains("input_precision=\"tf32x3\""), "{name:?}");
        assert!(u.contains("atol = rtol = 1e-4 for float32"), "{name:?}");
    }
    let u = set.render(TemplateName::Seed, &tf32).unwrap().user;
    assert!(u.contains("TF32 is allowed"), "{u}");
    assert!(
        u.contains("TF32 vs TF32") && u.contains("1e-2 for float32"),
        "{u}"
    );
    assert!(!u.contains("input_precision=\"ieee\""), "{u}");
    let explicit = PromptContext::for_task("t", RELU_TASK).with_precision(
        PrecisionPolicy::Strict,
        Some(1e-3),
        None,
    );
    let u = set.render(TemplateName::Seed, &explicit).unwrap().user;
    assert!(u.contains("within atol 1e-3, rtol 1e-4"), "{u}");
    // Without a policy in the context (an older caller) the rule is left out.
    let u = set
        .render(TemplateName::Seed, &PromptContext::for_task("t", RELU_TASK))
        .unwrap()
        .user;
    assert!(!u.contains("10. Precision"), "{u}");

    let mut result = failed(
        Category::Mismatch,
        "trial 1: out: 65000 of 65536 elements outside tolerance (atol 0.0001, rtol 0.0001)",
        "",
    );
    result.precision = Some(
        serde_json::from_value(serde_json::json!({
            "policy": "strict", "reduced": ["tf32_dot"],
            "statement": "the kernel computes in lower precision than the task's float32"
        }))
        .unwrap(),
    );
    let repair = strict.clone().with_eval(&result);
    assert!(
        repair.hints[0].contains("input_precision=\"ieee\"")
            && repair.hints[0].contains("3-8x slower"),
        "{:?}",
        repair.hints
    );
    let u = set.render(TemplateName::Repair, &repair).unwrap().user;
    assert!(u.contains("about a third of TF32's speed"), "{u}");
    // Under tf32 the same finding is accepted: no precision hint.
    result.precision.as_mut().unwrap().policy = PrecisionPolicy::Tf32;
    let repair = tf32.with_eval(&result);
    assert!(
        !repair.hints.iter().any(|h| h.contains("3-8x slower")),
        "{:?}",
        repair.hints
    );
}

#[test]
fn analysis_prompt_says_how_far_reference_and_kernel_are_from_the_speed_of_light() {
    let set = PromptSet::new(None).unwrap();
    let mut result = correct(0.05, 0.16, None);
    result.speed_of_light = Some(
        serde_json::from_value(serde_json::json!({
            "counts": {"flops": [], "total_flops": 0,
                       "bytes": {"inputs": 67108864, "parameters": 0, "outputs": 67108864},
                       "total_bytes": 134217728},
            "bound_ms": 0.02, "memory_ms": 0.02, "compute_ms": 0.0, "limit": "memory",
            "reference_pct": 12.5, "kernel_pct": 40.0, "faster_than_light": false
        }))
        .unwrap(),
    );
    let ctx = PromptContext::for_task("relu", RELU_TASK).with_eval(&result);
    let p = set.render(TemplateName::Analysis, &ctx).unwrap();
    assert!(
        p.user.contains(
            "- Speed of light: the reference is at 12% of the memory-bound limit; this kernel is at 40% \
             (100% = 0.0200 ms"
        ),
        "{}",
        p.user
    );
    // Without a bound (the CPU) the prompt has no such line.
    result.speed_of_light = None;
    let ctx = PromptContext::for_task("relu", RELU_TASK).with_eval(&result);
    let p = set.render(TemplateName::Analysis, &ctx).unwrap();
    assert!(!p.user.contains("Speed of light"), "{}", p.user);
}

/// Issue 36, item 3: a real traceback reaches the repair prompt as the kernel's frames with
/// their lines, the library frame that raised and the exception; no path of the machine;
/// and the next repair's history keeps the kernel's line, not the traceback's last lines.
#[test]
fn repair_prompts_show_the_kernels_line_not_the_harness_traceback() {
    let set = PromptSet::new(None).unwrap();
    let fixture = |name: &str| {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/tracebacks")
                .join(format!("{name}.txt")),
        )
        .unwrap()
    };
    let arange = failed(
        Category::Compile,
        "Triton compile error (row_kernel line 10, interpreter): ValueError: arange's arguments must be of type tl.constexpr",
        &fixture("arange"),
    );
    let tanhh = failed(
        Category::Compile,
        "Triton compile error (relu_kernel line 13, interpreter): AttributeError: module 'triton.language' has no attribute 'tanhh'",
        &fixture("tanhh"),
    );
    let ctx = PromptContext::for_task("19_ReLU", RELU_TASK)
        .with_kernel(Some(RELU_KERNEL.into()))
        .with_eval(&arange)
        .with_attempts(vec![AttemptFailure::from_eval(1, &tanhh)]);
    let u = set.render(TemplateName::Repair, &ctx).unwrap().user;
    assert!(!kforge::pysource::traceback::has_host_path(&u), "{u}");
    for leak in [
        "/root",
        ".cache",
        "/tmp/",
        "site-packages",
        "kforge_harness",
    ] {
        assert!(!u.contains(leak), "{leak}: {u}");
    }
    assert!(
        u.contains(
            "  File \"kernel.py\", line 10, in row_kernel\n      10 | cols = tl.arange(0, n_cols)"
        ),
        "{u}"
    );
    assert!(u.contains("  File \"triton/language/semantic.py\", line 614, in arange"));
    assert!(u.contains("ValueError: arange's arguments must be of type tl.constexpr"));
    // The failure shows three frames; the earlier attempt its two, with the kernel's line.
    assert_eq!(u.matches("\n  File \"").count(), 3 + 2, "{u}");
    assert!(
        u.contains("      13 | y = tl.maximum(tl.tanhh(x), 0.0)"),
        "the history keeps the kernel's line: {u}"
    );
    // Before: the last 8 lines of the history dropped it.
    let old_tail = kforge::prompts::context::excerpt(&fixture("tanhh"), 8, 1200);
    assert!(!old_tail.contains("tl.tanhh(x), 0.0)"));
}

/// A repair's hints answer the error, not the call sites its frames quote: a real
/// interpreter error raised inside a kernel launched as `kernel[grid](...)` (the launch line
/// is quoted in `forward`'s frame) gets the `tl.arange` hint and not the one about grids.
#[test]
fn repair_hints_answer_the_error_not_the_launch_line() {
    let message = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tracebacks/launch_grid.txt"),
    )
    .unwrap();
    let result = failed(
        Category::Compile,
        "Triton compile error (gemm_mul_leaky_kernel line 21, interpreter): ValueError: arange's arguments must be of type tl.constexpr",
        &message,
    );
    let ctx = PromptContext::for_task("19_ReLU", RELU_TASK).with_eval(&result);
    let failure = ctx.failure.as_ref().unwrap();
    assert!(
        failure
            .message
            .contains("      58 | gemm_mul_leaky_kernel[grid]("),
        "the launch is shown: {}",
        failure.message
    );
    assert!(
        ctx.hints
            .iter()
            .any(|h| h.contains("`tl.arange(0, N)` needs N")),
        "{:?}",
        ctx.hints
    );
    assert!(
        !ctx.hints.iter().any(|h| h.contains("launch grid")),
        "{:?}",
        ctx.hints
    );
}

/// Issue 36, item 8: a mismatch's first hint is read from the result's records.
#[test]
fn a_mismatch_hint_says_which_output_where_and_how_much() {
    let set = PromptSet::new(None).unwrap();
    let mut result = failed(
        Category::Mismatch,
        "trial 1: out: 7 of 1024 elements outside tolerance (atol 0.0001, rtol 0.0001); max abs err 0.763, max rel err 1; first at [15, 57]: 0 vs reference 0.678913",
        "",
    );
    result.trials = serde_json::from_value(serde_json::json!([{
        "kind": "random", "index": 0, "passed": false,
        "outputs": [{"output": "out", "passed": false, "shape": [16, 64], "dtype": "float32",
            "reason": "out: 7 of 1024 elements outside tolerance (atol 0.0001, rtol 0.0001); max abs err 0.763, max rel err 1; first at [15, 57]: 0 vs reference 0.678913",
            "max_abs_err": 0.7633707523345947, "max_rel_err": 1.0, "max_abs_ref": 0.9991871118545532,
            "bad_elements": 7, "numel": 1024}]
    }]))
    .unwrap();
    let ctx = PromptContext::for_task("19_ReLU", RELU_TASK)
        .with_kernel(Some(RELU_KERNEL.into()))
        .with_eval(&result);
    assert!(
        ctx.hints[0].starts_with("Output `out` (shape (16, 64), float32) is wrong on trial 1 (random): 7 of 1024 elements (0.68%) outside tolerance; the first wrong element is at index [15, 57]"),
        "{:?}",
        ctx.hints
    );
    let u = set.render(TemplateName::Repair, &ctx).unwrap().user;
    assert!(
        u.contains("look at the edges (the last, partial tile"),
        "{u}"
    );
    // What the reference returns, with its shape, from the result's records.
    assert!(
        u.contains(
            "For the task's own inputs the reference returns `out`: shape (16, 64), float32"
        ),
        "{u}"
    );
}

/// Issue 36, item 8: every prompt that asks for code starts with the same text (rules,
/// answer format, task), so that providers can cache it; the call's own content follows.
#[test]
fn code_prompts_share_one_static_prefix() {
    let set = PromptSet::new(None).unwrap();
    let ctx = full_context();
    let seed = set
        .render(
            TemplateName::Seed,
            &PromptContext::for_task("40_GRUHidden", GRU_TASK),
        )
        .unwrap()
        .user;
    let end = seed.find("## A worked example").unwrap();
    let prefix = &seed[..end];
    assert!(prefix.starts_with("## Triton rules"), "{prefix}");
    assert!(prefix.contains("## The task: `40_GRUHidden`"));
    for name in [
        TemplateName::Repair,
        TemplateName::OptimizeFromAnalysis,
        TemplateName::StageGridAndParallel,
        TemplateName::StageBlockTiling,
        TemplateName::StageMemoryAndTuning,
        TemplateName::Instructed,
    ] {
        let u = set.render(name, &ctx).unwrap().user;
        assert!(u.starts_with(prefix), "{name}:\n{u}");
    }
}
