//! Targeted repair hints (docs/architecture.md, Pipeline, step 3): what usually fixes a failure of
//! this category with this message. The repair prompt lists them under the error.
//!
//! Rules are checked in order; each adds at most one hint and a hint is never repeated.
//! Message patterns are matched case-insensitively on the cleaned error text (the
//! evaluator's `message`, or its one-line `summary` when that is all there is).

use std::sync::LazyLock;

use regex::Regex;

use crate::protocol::{MathKind, PrecisionPolicy};

/// One rule: the categories it applies to (empty: any), a message pattern (`None`: any
/// message), and the hint.
struct Rule {
    categories: &'static [&'static str],
    pattern: Option<&'static str>,
    hint: &'static str,
}

const COMPILE_LIKE: &[&str] = &["compile", "runtime", "import", "syntax"];

const RULES: &[Rule] = &[
    // --- static checks: say exactly which rule was broken.
    Rule {
        categories: &["static_check"],
        pattern: Some(r"no @triton\.jit kernel is defined"),
        hint: "The static check found no `@triton.jit` function: the computation must be written as at least one `@triton.jit` kernel (not PyTorch ops) and launched from `forward`.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"no @triton\.jit kernel is launched"),
        hint: "A `@triton.jit` kernel is defined but never launched: call it from `ModelNew.forward` as `kernel[grid](args..., BLOCK=...)` with `grid` a non-empty tuple.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"class modelnew|no forward method"),
        hint: "Define `class ModelNew(nn.Module)` at module level (not nested, not renamed) with a `forward` method taking the same arguments as `Model.forward`.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"try/except|fallback|contextlib\.suppress"),
        hint: "Remove every try/except (and contextlib.suppress) around kernel code: a fallback to PyTorch is rejected. Let errors surface so they can be fixed.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"threads and processes"),
        hint: "Do not import or use threading, multiprocessing, subprocess, concurrent or asyncio: run everything on the calling thread.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"patching"),
        hint: "Do not assign to attributes of torch, triton, time or other modules (no monkey-patching): only define your own kernels and ModelNew.",
    },
    Rule {
        categories: &["static_check"],
        pattern: Some(r"pytorch compute op"),
        hint: "`forward` may only allocate outputs (torch.empty, empty_like, zeros) and take views (view, reshape, permute, contiguous, stride): move the listed PyTorch compute op into a Triton kernel.",
    },
    Rule {
        categories: &["static_check", "syntax"],
        pattern: Some(r"syntaxerror|unparseable|could not be analysed"),
        hint: "The file is not valid Python: check indentation, unbalanced brackets, and that the answer contains exactly one complete code block.",
    },
    // --- shared memory, registers.
    Rule {
        categories: &["out_of_resources"],
        pattern: Some(r"shared"),
        hint: "Shared memory ran out: halve the BLOCK sizes of the tiles that go through `tl.dot` or `tl.load` (e.g. BLOCK_K 64 -> 32), lower `num_stages` (each stage keeps one more copy of every tile; try 2), and drop autotune configs whose tiles are too large.",
    },
    Rule {
        categories: &["out_of_resources"],
        pattern: Some(r"register|thread"),
        hint: "Too many registers or threads per block: use smaller BLOCK sizes or fewer `num_warps`, and keep fewer large tiles alive at the same time.",
    },
    Rule {
        categories: &["out_of_resources"],
        pattern: None,
        hint: "A launch asked for more of a per-block resource than the GPU has: reduce BLOCK sizes, `num_stages` and `num_warps` until the tile fits (the error names the resource, the requirement and the limit).",
    },
    // --- Triton language limits (compile errors, and the same mistakes under the interpreter).
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"tanh"),
        hint: "`tl.tanh` does not exist in this Triton: write it from `tl.exp`, overflow-safe: `e = tl.exp(-2.0 * tl.abs(x)); t = (1.0 - e) / (1.0 + e); tanh = tl.where(x >= 0, t, -t)`. Sigmoid: `1.0 / (1.0 + tl.exp(-x))`.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"sigmoid|erf\b|gelu|libdevice|tl\.math"),
        hint: "Use only functions that exist in `triton.language` (tl.exp, tl.log, tl.sqrt, tl.abs, tl.maximum, tl.where, tl.sum, tl.max, tl.dot): write sigmoid as `1 / (1 + tl.exp(-x))` and other activations from tl.exp.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"arange|power of (2|two)|constexpr"),
        hint: "`tl.arange(0, N)` needs N to be a `tl.constexpr` power of two: pass sizes as `BLOCK: tl.constexpr` kernel parameters set to `triton.next_power_of_2(n)` on the host, and mask the lanes past the real size (`offs < n`).",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"tl\.dot|dot\b.*(16|shape|size)|k >= 16|must be >= 16"),
        hint: "`tl.dot` needs both tile dimensions of each operand to be at least 16 (and powers of two): pad small dimensions up to 16 with masked loads (`other=0.0`), or use `tl.sum(a[:, :, None] * b[None, :, :], axis=1)` for tiny tiles.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(
            r"boolean value of tensor|truth value|cannot convert.*to bool|unsupportedlanguageconstruct|python control flow|data-dependent",
        ),
        hint: "Python `if`/`while` inside a kernel need a scalar condition: on a block of values compute both branches and select per element with `tl.where(cond, a, b)`; branch only on `tl.constexpr` values, scalar arguments or single loaded values.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"is not defined|nameerror|unbound|has no attribute"),
        hint: "A name or attribute does not exist inside the kernel: a jit kernel can only use its arguments, `tl.*` functions, other `@triton.jit` functions and module-level constants; pass everything else as an argument (Python objects, torch functions and methods of tensors are not available).",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"grid|cdiv|tuple"),
        hint: "The launch grid must be a non-empty tuple of ints (or a lambda returning one) computed on the host: `grid = (triton.cdiv(n, BLOCK),)`; note the trailing comma for a 1-D grid.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"incompatible|shape|broadcast|rank"),
        hint: "Tensor shapes inside the kernel do not line up: check every `[:, None]` / `[None, :]` broadcast, that masks have the shape of the pointer block they guard, and that `tl.dot` operands are 2-D `(M, K) x (K, N)`.",
    },
    Rule {
        categories: COMPILE_LIKE,
        pattern: Some(r"dtype|fp64|float64|int64|pointer"),
        hint: "Type problem in the kernel: load pointers to the tensor's own dtype, accumulate in `tl.float32` (`tl.zeros(..., dtype=tl.float32)`), and cast with `.to(tl.float32)` / `.to(x_ptr.dtype.element_ty)` before mixing or storing.",
    },
    Rule {
        categories: &["compile"],
        pattern: None,
        hint: "Triton compile error: the kernel body must stay inside the Triton language: no Python lists, dicts, `print`, recursion, `break`/`continue`, or calls to non-jit functions; every block size a `tl.constexpr`.",
    },
    Rule {
        categories: &["import"],
        pattern: Some(r"no module named|cannot import"),
        hint: "Import only torch, triton, triton.language and the Python standard library; the answer must be one self-contained file.",
    },
    Rule {
        categories: &["import"],
        pattern: Some(r"defined in a python file|@jit functions"),
        hint: "Define the kernels at module level with `@triton.jit` in the file itself (no exec, no string templates, no kernels built at run time).",
    },
    // --- wrong results.
    Rule {
        categories: &["mismatch"],
        pattern: Some(r"signed-input"),
        hint: "Correct on [0, 1) inputs but wrong on negative inputs: the kernel must be correct for negative values too (check max/ReLU-like branches, `tl.where` conditions, abs/sign handling, the `other=` of masked loads used in max reductions: use -inf, not 0).",
    },
    Rule {
        categories: &["mismatch"],
        pattern: Some(r"re-check after timing|post.timing|fresh values"),
        hint: "Correct at first but wrong on a re-check with fresh values in the same buffers: do not cache results between calls (no memo keyed by pointer or shape, no precomputed outputs); recompute everything in every `forward`.",
    },
    Rule {
        categories: &["mismatch"],
        pattern: Some(r"shape|structure|tuple|returned"),
        hint: "The output's shape or structure differs from the reference: return exactly what `Model.forward` returns (same tensors, same order, same shapes); read the `forward returns` line of the task.",
    },
    Rule {
        categories: &["mismatch"],
        pattern: Some(r"dtype"),
        hint: "The output dtype differs: allocate outputs with the reference's dtype (usually the input's) and cast the fp32 accumulator back when storing.",
    },
    Rule {
        categories: &["mismatch"],
        pattern: Some(r"nan|inf"),
        hint: "NaN/Inf where the reference is finite: masked loads need a neutral `other=` (0.0 for sums, -inf only for max), exponentials must be stabilized (subtract the row max; tanh/sigmoid in an overflow-safe form), and nothing may divide by a masked-out zero.",
    },
    Rule {
        categories: &["mismatch"],
        pattern: None,
        hint: "Wrong values: check the masks on every load and store at tile edges, the strides used for each dimension (use `x.stride(i)`, or call `.contiguous()` first), that accumulation happens in fp32, that weights are used with the same layout as PyTorch (nn.Linear computes x @ W.T), and that the result is what `Model.forward` returns. `tl.dot` on fp32 inputs rounds through TF32 by default: if errors are small but above tolerance, pass `input_precision=\"ieee\"` (`allow_tf32=False` on older Triton).",
    },
    // --- the audit: PyTorch (or something the audit could not see) produced an output.
    Rule {
        categories: &["torch_fallback"],
        pattern: Some(r"could not see"),
        hint: "Part of an output was produced where the evaluation cannot see it, and that is always refused: do not compute with numpy (`.numpy()`, `torch.from_numpy`, `torch.tensor` of computed data), in other threads, or with PyTorch's dispatch disabled, and do not write through raw pointers (`data_ptr()`). Compute every output with Triton kernels launched from `forward` on its own thread, and create constant tensors in `__init__`.",
    },
    Rule {
        categories: &["torch_fallback"],
        pattern: Some(r"computed by pytorch|no triton kernel was launched|triton kernels hold"),
        hint: "An output was computed by PyTorch, not by your Triton code: every output must be written by a Triton kernel that does its computation (a Triton copy of PyTorch's result does not count). Move the PyTorch op the message names (a reduction such as `.mean`/`.sum`, an activation, a `+ bias` epilogue) into Triton: fuse it into the kernel that produces its input, or add a Triton kernel for it. Library GEMM/conv calls (torch.matmul, F.linear, F.conv2d) may stay in PyTorch if a Triton kernel does the rest (bias, activation, reduction) and writes the result into its own output buffer.",
    },
    // --- crashes and hangs.
    Rule {
        categories: &["cuda_error"],
        pattern: Some(r"illegal memory access|out of bounds|misaligned|an illegal"),
        hint: "Illegal memory access: a load or store touches memory outside its tensor. Mask every `tl.load`/`tl.store` at the edges (`mask=offs < n`), check pointer offsets and strides per dimension, and compute offsets in int64 for large tensors (`pid.to(tl.int64) * stride`) since int32 offsets overflow past 2^31 elements.",
    },
    Rule {
        categories: &["cuda_error"],
        pattern: Some(r"device-side assert"),
        hint: "A device-side assert fired: an index is out of range (e.g. a gather/embedding index or a `tl.device_assert`); check index bounds and masks.",
    },
    Rule {
        categories: &["cuda_error", "crash"],
        pattern: None,
        hint: "The GPU kernel crashed the process: check masks, pointer arithmetic (offsets per dimension times the right stride), the grid size versus the data size, and that every tensor passed to the kernel is on the GPU and contiguous when indexed as flat memory.",
    },
    Rule {
        categories: &["oom"],
        pattern: None,
        hint: "Out of GPU memory: allocate only the outputs and small workspaces; do not materialize large intermediates (e.g. a (batch, seq, seq) matrix or per-step copies of the whole state) and do not keep tensors across calls.",
    },
    Rule {
        categories: &["timeout"],
        pattern: None,
        hint: "The evaluation timed out: look for loops that never end (a `while` whose condition never changes, a loop bound read from the wrong argument), a grid far too small so that each program does far too much work serially, or a launch per element from Python; also avoid autotuning over many configs.",
    },
    Rule {
        categories: &["runtime"],
        pattern: Some(r"unexpected keyword|positional argument|missing \d+ required|takes \d+"),
        hint: "The call signature does not match: `ModelNew.__init__` must accept exactly the arguments of `Model.__init__` (from get_init_inputs) and `forward` exactly those of `Model.forward`; kernel launches must pass every non-constexpr argument and each constexpr by keyword.",
    },
    Rule {
        categories: &["runtime"],
        pattern: Some(
            r"same device|cpu tensor|cannot be accessed from triton|device mismatch|on device cpu",
        ),
        hint: "Tensors are on different devices: allocate outputs on the input's device (`torch.empty(..., device=x.device)`) and register weights as `nn.Parameter`s or buffers so `.to(device)` moves them.",
    },
    Rule {
        categories: &["runtime", "harness", "task", "crash"],
        pattern: Some(r"weight|parameter|state_dict|size mismatch"),
        hint: "Parameters must align with the reference: keep `__init__`'s signature and create the same parameters, with the same names and shapes, in the same order (e.g. keep `self.linear = nn.Linear(...)` and read `self.linear.weight` in forward).",
    },
];

static COMPILED: LazyLock<Vec<Option<Regex>>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|r| {
            r.pattern
                .map(|p| Regex::new(&format!("(?i){p}")).expect("valid hint regex"))
        })
        .collect()
});

/// Targeted repair hints for a failure of `category` (the evaluator's category name:
/// `compile`, `mismatch`, ...) with the cleaned error `message`.
pub fn hints_for(category: &str, message: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (rule, pattern) in RULES.iter().zip(COMPILED.iter()) {
        if !rule.categories.is_empty() && !rule.categories.contains(&category) {
            continue;
        }
        if pattern.as_ref().is_some_and(|p| !p.is_match(message)) {
            continue;
        }
        if !out.iter().any(|h| h == rule.hint) {
            out.push(rule.hint.to_string());
        }
    }
    out
}

/// The precision hint (issue 22): for a `mismatch` of a kernel whose math the harness found
/// below what `policy` accepts (`reduced`, the result's `precision.reduced`), the fix for each
/// kind found and what it costs. None when nothing applies (the `tf32` policy accepts TF32).
///
/// `within` says how the judge holds float32 outputs (`PrecisionRecord::float32_within`).
pub fn precision_hint(
    policy: PrecisionPolicy,
    reduced: &[MathKind],
    within: &str,
) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    if reduced.contains(&MathKind::Tf32Dot) && !policy.allows_tf32() {
        parts.push(format!(
            "`tl.dot` on float32 operands runs in TF32 by default (10-bit mantissa, errors around 1e-3), and this \
             evaluation is `precision = \"{policy}\"`: float32 outputs must match the float32 reference \
             {within}. Pass `input_precision=\"ieee\"` to every `tl.dot` on float32 data (exact float32, \
             but 3-8x slower: no tensor cores) or `input_precision=\"tf32x3\"` (close to float32, about a third \
             of TF32's speed), and keep the accumulator in float32."
        ));
    }
    if reduced.iter().any(|k| {
        matches!(
            k,
            MathKind::LowPrecisionCast | MathKind::LowPrecisionAccumulator
        )
    }) {
        parts.push(format!(
            "The kernel casts float32 data to float16/bfloat16 (or accumulates in half precision): their 8-11 \
             bit mantissas cannot match float32 outputs {within}. Load, compute and accumulate in \
             float32 (`tl.zeros(..., dtype=tl.float32)`, no `.to(tl.float16)`/`.half()` of float32 data); \
             half-precision speed is not available on a float32 task under `precision = \"{policy}\"`."
        ));
    }
    // Under `tf32` switching TF32 on is accepted; autocast (half precision) never is.
    let switched = reduced.contains(&MathKind::Autocast)
        || (reduced.contains(&MathKind::Tf32Enabled) && !policy.allows_tf32());
    if switched {
        parts.push(format!(
            "Do not switch reduced precision on for PyTorch (`torch.backends.*.allow_tf32 = True`, \
             `torch.set_float32_matmul_precision(\"high\")`, autocast): under `precision = \"{policy}\"` the \
             reference computes in the task's dtype, and so must the kernel."
        ));
    }
    (!parts.is_empty()).then(|| parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precision_hint_names_the_fix_and_its_cost() {
        let h =
            precision_hint(PrecisionPolicy::Strict, &[MathKind::Tf32Dot], "within 1e-4").unwrap();
        assert!(h.contains("input_precision=\"ieee\""), "{h}");
        assert!(h.contains("input_precision=\"tf32x3\""), "{h}");
        assert!(h.contains("3-8x slower") && h.contains("a third"), "{h}");
        assert!(
            h.contains("within 1e-4") && h.contains("precision = \"strict\""),
            "{h}"
        );
        assert!(!h.contains("float16/bfloat16"), "{h}");

        let h = precision_hint(
            PrecisionPolicy::Strict,
            &[MathKind::LowPrecisionAccumulator, MathKind::Tf32Enabled],
            "within 1e-4",
        )
        .unwrap();
        assert!(h.contains("compute and accumulate in float32"), "{h}");
        assert!(h.contains("set_float32_matmul_precision"), "{h}");
        assert!(!h.contains("tf32x3"), "{h}");

        // TF32 is what the tf32 policy accepts: no hint for it, one for half casts.
        assert_eq!(
            precision_hint(
                PrecisionPolicy::Tf32,
                &[MathKind::Tf32Dot, MathKind::Tf32Enabled],
                "within 1e-2"
            ),
            None
        );
        let h = precision_hint(
            PrecisionPolicy::Tf32,
            &[MathKind::LowPrecisionCast],
            "within 1e-2",
        )
        .unwrap();
        assert!(h.contains("1e-2") && h.contains("\"tf32\""), "{h}");
        assert_eq!(
            precision_hint(PrecisionPolicy::Strict, &[], "within 1e-4"),
            None
        );
        assert_eq!(
            precision_hint(PrecisionPolicy::Strict, &[MathKind::IeeeDot], "within 1e-4"),
            None
        );
    }

    fn any(hints: &[String], needle: &str) -> bool {
        hints.iter().any(|h| h.contains(needle))
    }

    #[test]
    fn shared_memory_out_of_resources_suggests_smaller_tiles_and_stages() {
        let h = hints_for(
            "out_of_resources",
            "out of resources: shared memory requires 262144, the limit is 232448",
        );
        assert!(any(&h, "num_stages"), "{h:?}");
        assert!(any(&h, "halve the BLOCK sizes"), "{h:?}");
        assert!(!any(&h, "registers"), "{h:?}");
    }

    #[test]
    fn missing_tanh_is_written_from_exp() {
        let h = hints_for(
            "compile",
            "AttributeError: module 'triton.language' has no attribute 'tanh'",
        );
        assert!(any(&h, "tl.exp(-2.0 * tl.abs(x))"), "{h:?}");
        assert!(any(&h, "does not exist inside the kernel"), "{h:?}");
    }

    #[test]
    fn arange_needs_constexpr_power_of_two() {
        for msg in [
            "arange's range must be a power of 2",
            "ValueError: arange's arguments must be of type tl.constexpr",
        ] {
            let h = hints_for("compile", msg);
            assert!(any(&h, "power of two"), "{msg}: {h:?}");
            assert!(any(&h, "next_power_of_2"), "{msg}: {h:?}");
        }
    }

    #[test]
    fn mismatch_hints_depend_on_the_trial() {
        let signed = hints_for("mismatch", "signed-input trial: output: max abs error 0.8");
        assert!(any(&signed, "negative inputs"), "{signed:?}");
        assert!(any(&signed, "masks on every load"), "{signed:?}");

        let recheck = hints_for(
            "mismatch",
            "re-check after timing (fresh values in the timing buffers): output: max abs error 1.2",
        );
        assert!(any(&recheck, "do not cache results"), "{recheck:?}");
        assert!(!any(&recheck, "negative inputs"), "{recheck:?}");

        let shape = hints_for(
            "mismatch",
            "trial 1: output: shape (8, 128), the reference (2, 8, 128)",
        );
        assert!(any(&shape, "Model.forward"), "{shape:?}");
        assert!(any(&shape, "accumulation happens in fp32"), "{shape:?}");
        assert!(any(&shape, "input_precision"), "{shape:?}");
    }

    #[test]
    fn crashes_timeouts_and_oom() {
        let h = hints_for(
            "cuda_error",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        );
        assert!(any(&h, "int64"), "{h:?}");
        assert!(any(&h, "Mask every"), "{h:?}");
        let t = hints_for("timeout", "timed out after 300s (during correctness)");
        assert!(
            any(&t, "never end") && any(&t, "grid far too small"),
            "{t:?}"
        );
        assert!(any(
            &hints_for("oom", "CUDA out of memory"),
            "intermediates"
        ));
    }

    #[test]
    fn static_check_names_the_broken_rule() {
        let h = hints_for(
            "static_check",
            "try/except around kernel code: a fallback hides kernel failures (remove the try/except)",
        );
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h[0].contains("try/except"));
        let h = hints_for(
            "static_check",
            "no @triton.jit kernel is defined: the work must run in Triton",
        );
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h[0].contains("at least one `@triton.jit` kernel"));
        let h = hints_for(
            "static_check",
            "PyTorch compute op torch.matmul in forward (line 12): part of the work may not run in Triton",
        );
        assert!(any(&h, "move the listed PyTorch compute op"), "{h:?}");
    }

    #[test]
    fn compile_errors_get_language_limits_and_unknown_categories_nothing() {
        let h = hints_for(
            "compile",
            "Triton compile error (k line 4): Boolean value of Tensor with more than one value is ambiguous",
        );
        assert!(any(&h, "tl.where"), "{h:?}");
        assert!(any(&h, "inside the Triton language"), "{h:?}");
        let dot = hints_for(
            "compile",
            "AssertionError: All values in both first input shape ([constexpr[8], constexpr[8]]) and second input shape must be >= 16",
        );
        assert!(any(&dot, "at least 16"), "{dot:?}");
        assert!(hints_for("cancelled", "whatever").is_empty());
    }

    #[test]
    fn device_hint_only_for_device_errors() {
        let h = hints_for(
            "runtime",
            "ValueError: Pointer argument (at 0) cannot be accessed from Triton (cpu tensor?)",
        );
        assert!(any(&h, "different devices"), "{h:?}");
        let other = hints_for(
            "runtime",
            "File \"/usr/lib/python3/torch/cuda/__init__.py\", line 3\nTypeError: takes 2 positional arguments but 3 were given",
        );
        assert!(!any(&other, "different devices"), "{other:?}");
        assert!(any(&other, "signature does not match"), "{other:?}");
    }

    #[test]
    fn torch_fallback_names_what_to_move_and_refuses_unseen_work() {
        let h = hints_for(
            "torch_fallback",
            "out was computed by PyTorch (100%), Triton wrote 0% of it: move `mean` into a Triton kernel (fuse it into the kernel that computes its input, or add a Triton kernel for it); 1 Triton launch(es) (linear_gelu_kernel x1), 1 PyTorch compute op(s); out: 100% PyTorch (mean)",
        );
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(any(&h, "fuse it into the kernel"), "{h:?}");
        assert!(any(&h, "torch.matmul, F.linear, F.conv2d"), "{h:?}");
        assert!(!any(&h, "numpy"), "{h:?}");

        let u = hints_for(
            "torch_fallback",
            "100% of out was produced where the audit could not see it (numpy, another thread, disabled dispatch, raw memory writes): compute every output with Triton kernels launched from forward, on its thread",
        );
        assert_eq!(u.len(), 1, "{u:?}");
        assert!(any(&u, "do not compute with numpy"), "{u:?}");
        assert!(any(&u, "other threads"), "{u:?}");

        let gpu = hints_for(
            "torch_fallback",
            "Triton kernels hold 2% of GPU time, other PyTorch kernels 90%",
        );
        assert!(any(&gpu, "Move the PyTorch op"), "{gpu:?}");
    }

    #[test]
    fn hints_are_never_repeated() {
        let h = hints_for("crash", "weight size mismatch; segmentation fault");
        let mut dedup = h.clone();
        dedup.dedup();
        assert_eq!(h, dedup);
        assert!(any(&h, "same names and shapes"), "{h:?}");
    }
}
