"""The precision policy and the static detector of what a kernel computes in (issue 22)."""

from __future__ import annotations

import textwrap
from typing import Any, Iterable, Mapping

import torch

from kforge_harness import precision
from kforge_harness.precision import (AUTOCAST, DOT_UNKNOWN, IEEE_DOT, LOW_PRECISION_ACCUMULATOR,
                                      LOW_PRECISION_CAST, TF32_DOT, TF32_ENABLED, TF32X3_DOT)


GEMM = '''
import torch
import triton
import triton.language as tl

PRECISION = "ieee"


@triton.jit
def gemm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK: tl.constexpr{params}):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype={acc})
    for k in range(0, K, BLOCK):
        a = tl.load(a_ptr + offs[:, None] * K + k + offs[None, :])
        b = tl.load(b_ptr + (k + offs[:, None]) * N + offs[None, :])
        acc += {dot}
    tl.store(c_ptr + offs[:, None] * N + offs[None, :], acc)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        gemm[(1,)](a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK=32{launch})
        return c
'''


def findings(dot: str = "tl.dot(a, b)", acc: str = "tl.float32", params: str = "", launch: str = "",
             extra: str = "") -> list[precision.Finding]:
    source = GEMM.format(dot=dot, acc=acc, params=params, launch=launch) + textwrap.dedent(extra)
    return precision.scan(source)


def categories(found: Iterable[Mapping[str, Any]]) -> list[str]:
    return [f["category"] for f in found]


def test_a_default_precision_dot_is_tf32() -> None:
    found = findings()
    assert categories(found) == [TF32_DOT]
    f = found[0]
    assert f["lowers"] and not f["dynamic"] and f["where"] == "kernel gemm" and f["line"] == 16
    assert f["text"] == "tl.dot at line 16 of gemm computes in TF32 on float32 operands (without input_precision)"


def test_explicit_input_precisions() -> None:
    assert categories(findings('tl.dot(a, b, input_precision="ieee")')) == [IEEE_DOT]
    assert categories(findings('tl.dot(a, b, input_precision="tf32x3")')) == [TF32X3_DOT]
    assert categories(findings('tl.dot(a, b, input_precision="tf32")')) == [TF32_DOT]
    assert categories(findings('tl.dot(a, b, None, "ieee")')) == [IEEE_DOT], "positional input_precision"
    assert categories(findings("tl.dot(a, b, allow_tf32=False)")) == [IEEE_DOT]
    assert categories(findings("tl.dot(a, b, allow_tf32=True)")) == [TF32_DOT]
    assert categories(findings("tl.dot(a, b, input_precision=None)")) == [TF32_DOT], "None is the default"
    assert not any(f["lowers"] for f in findings('tl.dot(a, b, input_precision="tf32x3")'))


def test_constants_defaults_and_launch_values_are_resolved() -> None:
    assert categories(findings("tl.dot(a, b, input_precision=PRECISION)")) == [IEEE_DOT]
    assert categories(findings("tl.dot(a, b, input_precision=PREC)", params=', PREC: tl.constexpr = "tf32x3"')) \
        == [TF32X3_DOT]
    assert categories(findings("tl.dot(a, b, input_precision=PREC)", params=", PREC: tl.constexpr",
                               launch=', PREC="ieee"')) == [IEEE_DOT]
    # A launch value overrides the parameter's default.
    assert categories(findings("tl.dot(a, b, input_precision=PREC)", params=', PREC: tl.constexpr = "ieee"',
                               launch=', PREC="tf32"')) == [TF32_DOT]
    unknown = findings("tl.dot(a, b, input_precision=PREC)", params=", PREC: tl.constexpr")
    assert categories(unknown) == [DOT_UNKNOWN] and not unknown[0]["lowers"]


def test_triton_f32_default_environment_sets_the_default() -> None:
    extra = 'import os\nos.environ["TRITON_F32_DEFAULT"] = "ieee"\n'
    assert categories(findings(extra=extra)) == [IEEE_DOT]


def test_matmul_operator_in_a_kernel_is_a_default_dot() -> None:
    assert categories(findings("a @ b")) == [TF32_DOT]


def test_accumulators_fp32_is_quiet_half_is_found() -> None:
    assert categories(findings('tl.dot(a, b, input_precision="ieee")', acc="tl.float32")) == [IEEE_DOT]
    found = findings('tl.dot(a, b, input_precision="ieee")', acc="tl.float16")
    assert categories(found) == [LOW_PRECISION_ACCUMULATOR, IEEE_DOT]
    assert "float16" in found[0]["text"]
    found = findings('tl.dot(a, b, input_precision="ieee", out_dtype=tl.float16)')
    assert LOW_PRECISION_ACCUMULATOR in categories(found)


def test_half_casts_in_kernels_and_forward() -> None:
    assert sorted(categories(findings('tl.dot(a.to(tl.float16), b.to(tl.float16))'))) == \
        [LOW_PRECISION_CAST, LOW_PRECISION_CAST, TF32_DOT]
    assert LOW_PRECISION_CAST in categories(findings('tl.dot(a.to(tl.bfloat16), b, input_precision="ieee")'))
    extra = '''
    class Other(torch.nn.Module):
        def forward(self, x):
            y = x.half()
            z = x.to(torch.bfloat16)
            w = x.to(dtype=torch.float16)
            v = x.to("cuda").to(torch.float32)
            return y, z, w, v
    '''
    host = [f for f in findings('tl.dot(a, b, input_precision="ieee")', extra=extra) if f["where"] == "module"]
    assert categories(host) == [LOW_PRECISION_CAST] * 3
    assert [h["text"].split(" casts")[0] for h in host] == ["x.half", "x.to", "x.to"]


def test_tf32_switched_on_and_autocast() -> None:
    extra = '''
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("high")
    torch.set_float32_matmul_precision("highest")
    with torch.autocast("cuda"):
        pass
    '''
    host = [f for f in findings('tl.dot(a, b, input_precision="ieee")', extra=extra) if f["where"] == "module"]
    assert categories(host) == [TF32_ENABLED, TF32_ENABLED, TF32_ENABLED, AUTOCAST]
    assert all(f["lowers"] for f in host)


def test_unparseable_source_has_no_findings() -> None:
    assert precision.scan("def (:") == []


def test_policy_settings_are_applied_and_read_back() -> None:
    before = precision.settings()
    try:
        assert precision.apply_policy("tf32") == {"matmul": True, "cudnn": True, "float32_matmul_precision": "high"}
        assert precision.apply_policy("strict") == {"matmul": False, "cudnn": False,
                                                    "float32_matmul_precision": "highest"}
        assert precision.apply_policy("pytorch") == {"matmul": False, "cudnn": True,
                                                     "float32_matmul_precision": "highest"}
        assert torch.backends.cudnn.allow_tf32 and not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before["matmul"]
        torch.backends.cudnn.allow_tf32 = before["cudnn"]
        torch.set_float32_matmul_precision(before["float32_matmul_precision"])


def test_dynamic_findings_compare_the_kernels_settings_with_the_policy() -> None:
    on = {"matmul": True, "cudnn": False, "float32_matmul_precision": "high"}
    found = precision.dynamic_findings("strict", on)
    assert categories(found) == [TF32_ENABLED] and found[0]["dynamic"]
    assert "allow_tf32 was on" in found[0]["text"] and "'high'" in found[0]["text"]
    assert precision.dynamic_findings("tf32", on) == []
    assert precision.dynamic_findings("pytorch", {"matmul": False, "cudnn": True,
                                                  "float32_matmul_precision": "highest"}) == []
    assert precision.dynamic_findings("strict", None) == []


def test_summary_applies_findings_to_the_tasks_dtypes() -> None:
    tf32 = findings()
    record = precision.summarize("strict", tf32, ["float32"], {"float32": 1e-4})
    assert record["reduced"] == [TF32_DOT]
    assert record["statement"].startswith("the kernel computes in lower precision than the task's float32: "
                                          "tl.dot at line 16 of gemm computes in TF32")
    assert record["policy"] == "strict" and record["kernel_math"] == tf32
    # On a half-precision task the same dot is the task's own precision.
    assert precision.summarize("strict", tf32, ["float16"], {})["reduced"] == []
    # Under the tf32 policy TF32 is allowed; half casts are still lower.
    assert precision.summarize("tf32", tf32, ["float32"], {})["reduced"] == []
    assert precision.summarize("tf32", tf32, ["float32"], {})["statement"] == "the kernel's GEMMs compute in TF32"
    cast = findings("tl.dot(a.to(tl.float16), b)")
    assert precision.summarize("tf32", cast, ["float32"], {})["reduced"] == [LOW_PRECISION_CAST]
    ieee = findings('tl.dot(a, b, input_precision="ieee")')
    assert precision.summarize("strict", ieee, ["float32"], {})["statement"] == \
        "the kernel's GEMMs compute in full float32"


# -- issue 34, item 8: what the source reading missed, and the compiled kernel -------------------

def test_casts_of_expressions_and_dtype_aliases_are_read() -> None:
    assert LOW_PRECISION_CAST in categories(findings('tl.dot((a * 2.0).to(tl.float16), b, input_precision="ieee")'))
    alias = 'LOW = tl.float16\n'
    source = GEMM.format(dot='tl.dot(a.to(LOW), b, input_precision="ieee")', acc="LOW", params="", launch="")
    found = precision.scan(source.replace("PRECISION = ", alias + "PRECISION = "))
    assert LOW_PRECISION_CAST in categories(found) and LOW_PRECISION_ACCUMULATOR in categories(found), found


def test_a_precision_some_launch_computes_at_run_time_is_unknown_not_the_default() -> None:
    found = findings("tl.dot(a, b, input_precision=PREC)", params=', PREC: tl.constexpr = "ieee"',
                     launch=", PREC=choose(a)")
    assert categories(found) == [DOT_UNKNOWN], found


TTIR = '''
    %c_8 = tt.dot %a_7, %b_7, %c, inputPrecision = tf32 : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32> loc(#loc12)
    %d_8 = tt.dot %a_7, %b_7, %c : tensor<32x32xf32> * tensor<32x32xf32> -> tensor<32x32xf32> loc(#loc13)
    %m = arith.truncf %x_3 : tensor<64xf32> to tensor<64xf16> loc(#loc33)
    %acc:2 = scf.for %k = %c0 to %K step %c32 iter_args(%a = %z, %i = %c0) -> (tensor<32x32xf16>, i32)  : i32 {
      %s_10 = arith.addf %s_8, %s_9 : f16 loc(#loc40)
#loc5 = loc("/tmp/eval-x/kernel_jit.py":9:12)
#loc6 = loc("/tmp/eval-x/kernel.py":14:16)
#loc7 = loc("/site-packages/triton/language/standard.py":212:25)
#loc12 = loc("c"(#loc6))
#loc13 = loc("/tmp/eval-x/kernel.py":20:5)
#loc27 = loc("m"(#loc6))
#loc33 = loc(callsite(#loc5 at #loc27))
#loc40 = loc(callsite(#loc7 at #loc27))
'''


def test_the_compiled_code_names_dots_casts_and_half_accumulators_by_their_lines() -> None:
    found = precision.ttir_findings("k", TTIR)
    by = {(f["category"], f["line"]) for f in found}
    assert (TF32_DOT, 14) in by and (IEEE_DOT, 20) in by
    assert (LOW_PRECISION_CAST, 9) in by, "an inlined helper's cast is at the helper's own line"
    assert (LOW_PRECISION_ACCUMULATOR, None) in by, "a loop carrying float16"
    assert (LOW_PRECISION_ACCUMULATOR, 14) in by, "a float16 sum in a library reduction: the calling line"
    assert all(f["compiled"] and f["where"] == "kernel k" for f in found)
    assert precision.ttir_findings("k", "") == []


def test_compiled_findings_replace_the_sources_about_triton_code_only_when_every_launch_was_read() -> None:
    source = findings(extra="x = 1\n") + precision.scan("import torch\nclass M:\n    def f(self, x):\n"
                                                        "        return x.half()\n")
    ok: dict[str, Any] = {"kernels": [{"kernel": "gemm", "ttir": TTIR, "ptx": None, "error": None}], "errors": [],
          "compiled_for": "CUDA sm_90"}
    found, how = precision.with_compiled(source, ok)
    assert how["read"] == "compiled" and how["kernels"] == ["gemm"]
    assert not [f for f in found if f["where"].startswith("kernel ") and not f.get("compiled")]
    assert [f for f in found if f["where"] == "module"], "host findings stay"
    failed = dict(ok, kernels=[dict(ok["kernels"][0], ttir=None, error="CompilationError: at 3:4")])
    found, how = precision.with_compiled(source, failed)
    assert found == source and how["read"] == "source" and "CompilationError" in how["why"]
    assert precision.with_compiled(source, None) == (source, {"read": "source",
                                                              "why": "the compiled kernels were not read"})
    found, how = precision.with_compiled(source, {"kernels": [], "errors": []})
    assert found == source and how["why"] == "no Triton launch was read"


def test_ptx_alone_says_tf32_and_half_conversions() -> None:
    ptx = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}\ncvt.rn.f16.f32 %h1, %f2;"
    assert sorted(categories(precision.ptx_findings("k", ptx))) == [LOW_PRECISION_CAST, TF32_DOT]
    assert precision.ptx_findings("k", "fma.rn.f32 %f1, %f2, %f3, %f4;") == []
