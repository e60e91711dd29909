"""Tests of kforge_harness/audit.py: classify on hand-made records (pure), and audited_forward on the
CPU through Triton's interpreter with the fixture kernels and a few inline models.

Run: cd src/eval/harness && TRITON_INTERPRET=1 PYTHONPATH=/work/pytest-site:. python -m pytest tests/test_audit.py -q
"""
import copy
import importlib.util
import json
import os
import pathlib
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")  # must precede the first import of triton

import pytest

HERE = pathlib.Path(__file__).resolve().parent
KERNELS = HERE.parents[2].parent / "tests" / "fixtures" / "kernels"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton looks kernels' modules up by name
    spec.loader.exec_module(module)
    return module


# By path: works with the monolithic kforge_harness.py beside the package directory, and without torch.
audit = load(HERE.parent / "kforge_harness" / "audit.py", "kforge_audit_under_test")


# ---------------------------------------------------------------------------
# classify: hand-made records
# ---------------------------------------------------------------------------

def shares(**kw):
    out = dict.fromkeys(audit.LABELS, 0.0)
    out.update(kw)
    return out


def output(path="out", writers=None, **kw):
    return {"path": path, "shape": [4, 8], "dtype": "float32", "numel": 32, "shares": shares(**kw),
            "writers": writers or {}}


def record(outputs=None, launches=1, gpu=None, ops=None):
    return {
        "version": 1, "device": "cuda" if gpu is not None else "cpu",
        "aten_ops": ops if ops is not None else [{"name": "empty_like", "count": 1, "kind": "alloc"}],
        "aten_ops_dropped": 0, "triton_launches": launches,
        "launches": [{"name": "relu_kernel", "count": launches, "elements_written": 32}] if launches else [],
        "outputs": outputs if outputs is not None else [output(triton=1.0, writers={"triton": "relu_kernel"})],
        "gpu": gpu, "errors": [],
    }


def gpu(triton, library, aten, copy_=0.0):
    return {"measured": True, "total_us": 100.0,
            "shares": {"triton": triton, "library": library, "aten": aten, "copy": copy_},
            "kernels": [{"name": "relu_kernel", "class": "triton", "us": triton * 100, "count": 1}]}


def test_triton_output_is_ok():
    result = audit.classify(record(), False)
    assert result["verdict"] == "ok"
    assert "out: 100% Triton (relu_kernel)" in result["summary"]
    assert result["triton_share"] is None  # no GPU time on the CPU


def test_no_launch_is_torch_fallback():
    result = audit.classify(record(launches=0, outputs=[output(aten=1.0, writers={"aten": "relu"})]), False)
    assert result["verdict"] == "torch_fallback"
    assert "no Triton kernel was launched" in result["summary"]


def test_token_launch_with_aten_output_is_torch_fallback():
    result = audit.classify(record(outputs=[output(aten=1.0, writers={"aten": "relu"})]), False)
    assert result["verdict"] == "torch_fallback"
    assert "out was computed by PyTorch (100%)" in result["summary"]
    assert "(relu)" in result["summary"]


def test_library_output_is_torch_fallback():
    # torch.matmul's result returned as is: a library GEMM beside Triton is legal, AS the output is not
    result = audit.classify(record(outputs=[output(library=1.0, writers={"library": "mm"})]), False)
    assert result["verdict"] == "torch_fallback"


def test_any_output_of_several():
    outs = [output("out[0]", triton=1.0), output("out[1]", aten=1.0)]
    result = audit.classify(record(outputs=outs), False)
    assert result["verdict"] == "torch_fallback"
    assert "out[1] was computed by PyTorch" in result["summary"]
    assert "out[0] was" not in result["summary"]


@pytest.mark.parametrize("split,verdict", [
    (dict(aten=0.95, triton=0.05), "torch_fallback"),   # a Triton sliver
    (dict(aten=0.5, triton=0.5), "ok"),                   # a meaningful part in Triton
    (dict(input=1.0), "ok"),                              # copies of inputs are not PyTorch compute
    (dict(alloc=0.5, input=0.5), "ok"),                   # allocations neither
    (dict(input=0.95, aten=0.05), "ok"),                  # PyTorch computed less than a meaningful part
])
def test_output_shares(split, verdict):
    assert audit.classify(record(outputs=[output(**split)]), False)["verdict"] == verdict


def test_gpu_hybrid_shares_are_legal_and_reported():
    result = audit.classify(record(gpu=gpu(triton=0.3, library=0.68, aten=0.02)), True)
    assert result["verdict"] == "ok"
    assert (result["triton_share"], result["library_share"], result["aten_share"]) == (0.3, 0.68, 0.02)
    assert "Triton kernels: 30% of GPU time; cuBLAS/cuDNN: 68%; other PyTorch kernels: 2%" in result["summary"]


def test_gpu_small_triton_share_beside_library_is_legal():
    # cuBLAS input projection dominating a short Triton recurrence that writes the output
    assert audit.classify(record(gpu=gpu(triton=0.03, library=0.97, aten=0.0)), True)["verdict"] == "ok"


def test_gpu_negligible_triton_share_with_aten_dominating_is_torch_fallback():
    result = audit.classify(record(gpu=gpu(triton=0.02, library=0.0, aten=0.9, copy_=0.08)), True)
    assert result["verdict"] == "torch_fallback"
    assert "Triton kernels hold 2% of GPU time, other PyTorch kernels 90%" in result["summary"]


def test_gpu_aten_not_dominating_is_ok():
    assert audit.classify(record(gpu=gpu(triton=0.05, library=0.65, aten=0.3)), True)["verdict"] == "ok"


def test_gpu_not_measured_relies_on_provenance():
    r = record(gpu={"measured": False, "reason": "RuntimeError: CUPTI unavailable"})
    result = audit.classify(r, True)
    assert result["verdict"] == "ok" and result["triton_share"] is None
    assert "GPU time not measured: RuntimeError: CUPTI unavailable" in result["summary"]


def test_audit_errors_fail_closed():
    r = record()
    r["errors"] = ["aten.add: RuntimeError: boom"]
    result = audit.classify(r, False)
    assert result["verdict"] == "malformed"
    assert "could not follow the forward" in result["summary"]


@pytest.mark.parametrize("name,cls", [
    ("relu_kernel", "triton"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT", "library"),
    ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "library"),
    ("ampere_sgemm_128x64_nn", "library"),
    ("void cudnn::cnn::conv2d_grouped_direct_kernel<float, float>", "library"),
    ("Memcpy DtoD (Device -> Device)", "copy"),
    ("void at::native::elementwise_kernel<128, 2, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>", "copy"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar>", "aten"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>", "aten"),
    ("triton_poi_fused_relu_0", "aten"),  # torch.compile's kernels are PyTorch's, not the candidate's
])
def test_gpu_kernel_classes(name, cls):
    assert audit.kernel_class(name, {"relu_kernel"}) == cls


def mutate(path, value):
    r = record(gpu=gpu(triton=0.3, library=0.7, aten=0.0))
    target = r
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return r


@pytest.mark.parametrize("path,value", [
    (("version",), 2), (("version",), True), (("device",), "tpu"), (("aten_ops_dropped",), -1),
    (("triton_launches",), True), (("triton_launches",), "1"), (("triton_launches",), 0),  # < per-name sum
    (("triton_launches",), 10 ** 400), (("launches", 0, "count"), 1.5), (("launches", 0, "name"), "k" * 1000),
    (("outputs", 0, "shares", "triton"), float("nan")), (("outputs", 0, "shares", "triton"), 0.5),  # sum != 1
    (("outputs", 0, "shares", "bogus"), 0.0), (("outputs", 0, "shape"), [-1]), (("outputs", 0, "numel"), None),
    (("outputs", 0, "writers"), {"me": "x"}), (("outputs", 0, "path"), ["out"]), (("outputs", 0, "shares"), KeyError),
    (("gpu", "shares", "triton"), 0.9), (("gpu", "total_us"), float("inf")), (("gpu", "kernels", 0, "us"), 1e9),
    (("gpu", "measured"), 1), (("gpu",), {"measured": False}), (("errors",), "none"), (("errors",), [1]),
    (("outputs",), [output()] * (audit.MAX_OUTPUTS + 1)), (("aten_ops",), [{"name": "relu", "count": 1}]),
    (("extra",), 1), (("gpu",), KeyError),
])
def test_malformed_records_are_rejected(path, value):
    result = audit.classify(mutate(path, value), True)
    assert result["verdict"] == "malformed", result
    assert result["summary"].startswith("audit record rejected")


def test_classify_accepts_records_with_and_without_the_memory_keys():
    r = record()
    assert audit.classify(r, False)["verdict"] == "ok"
    r.update(snapshots="host", bookkeeping_peak_bytes=123)
    assert audit.classify(r, False)["verdict"] == "ok"
    for key, value in [("snapshots", "disk"), ("snapshots", None), ("bookkeeping_peak_bytes", -1),
                       ("bookkeeping_peak_bytes", 1.5), ("bookkeeping_peak_bytes", True)]:
        bad = dict(r, **{key: value})
        assert audit.classify(bad, False)["verdict"] == "malformed", (key, value)


@pytest.mark.parametrize("junk", [None, [], "ok", 1, {"verdict": "ok"}, [record()]])
def test_non_records_are_rejected(junk):
    assert audit.classify(junk, False)["verdict"] == "malformed"


def test_device_mismatch_is_rejected():
    # a worker must not dodge the GPU-time rule by calling itself a CPU run
    assert audit.classify(record(), True)["verdict"] == "malformed"


def test_classify_survives_any_field_value():
    base = record(gpu=gpu(triton=0.3, library=0.7, aten=0.0))
    junk = [None, -1, True, 1e308, float("nan"), "", "x" * 300, [], {}, [[[]]], {"a": {"b": []}}, 10 ** 30]

    def paths(value, prefix=()):
        yield prefix
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in children:
            yield from paths(child, prefix + (key,))

    for path in list(paths(base))[1:]:
        for value in junk:
            r = copy.deepcopy(base)
            target = r
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            result = audit.classify(r, True)  # must not raise
            assert result["verdict"] in ("ok", "torch_fallback", "malformed")
            json.dumps(result)


# ---------------------------------------------------------------------------
# audited_forward on the CPU (Triton interpreter)
# ---------------------------------------------------------------------------

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def run(model, *inputs):
    outputs, rec = audit.audited_forward(model, list(inputs), "cpu", [])
    json.loads(json.dumps(rec))  # plain JSON, as it will cross the process boundary
    result = audit.classify(rec, False)
    return outputs, rec, result


def fixture(name, *init):
    return load(KERNELS / (name + ".py"), "kforge_fixture_" + name).ModelNew(*init)


@pytest.fixture
def signed():
    # negative values: on inputs >= 0 an honest ReLU IS a copy of its input
    torch.manual_seed(0)
    return torch.randn(8, 100)


def test_relu_ok_is_ok(signed):
    out, rec, result = run(fixture("relu_ok"), signed)
    assert torch.equal(out, torch.relu(signed))
    assert result["verdict"] == "ok", result["summary"]
    assert rec["outputs"][0]["shares"]["triton"] == 1.0
    assert rec["launches"] == [{"name": "relu_kernel", "count": 1, "elements_written": 800}]


def test_token_launch_is_torch_fallback(signed):
    out, rec, result = run(fixture("relu_token_launch"), signed)
    assert torch.equal(out, torch.relu(signed))  # correct values: only the audit catches it
    assert result["verdict"] == "torch_fallback"
    assert rec["triton_launches"] == 1
    assert rec["outputs"][0]["shares"]["aten"] == 1.0 and rec["outputs"][0]["writers"] == {"aten": "relu"}


def test_torch_then_triton_copy_is_torch_fallback(signed):
    out, rec, result = run(fixture("relu_torch_then_triton_copy"), signed)
    assert torch.equal(out, torch.relu(signed))
    assert result["verdict"] == "torch_fallback"
    assert rec["outputs"][0]["shares"]["aten"] == 1.0
    assert rec["launches"][0]["elements_written"] == 0  # the copy is credited to its source


def rnn_reference(model, x):
    return model.rnn(x)[1]


@pytest.mark.parametrize("name", ["rnn_hidden_ok", "rnn_hidden_hybrid_ok"])
def test_rnn_kernels_are_ok(name):
    torch.manual_seed(0)
    model, x = fixture(name, 16, 32), torch.randn(3, 5, 16)
    out, rec, result = run(model, x)
    assert torch.allclose(out, rnn_reference(model, x), atol=1e-5)
    assert result["verdict"] == "ok", result["summary"]
    assert rec["outputs"][0]["shares"]["triton"] == 1.0
    ops = {o["name"]: o["kind"] for o in rec["aten_ops"]}
    if name == "rnn_hidden_hybrid_ok":
        assert ops.get("addmm") == "library"  # the hybrid's split shows
        assert rec["launches"][0]["count"] == 5  # one launch per time step
    else:
        assert "compute" not in ops.values() and "library" not in ops.values()


def test_relu_torch_ops_split_and_the_non_negative_input_caveat(signed):
    # torch.mul(x, 1.0) then a Triton ReLU: on signed inputs Triton computes half the elements;
    # on inputs >= 0 the ReLU changes nothing, so the output is the PyTorch product, verbatim.
    _, rec, result = run(fixture("relu_torch_ops"), signed)
    assert result["verdict"] == "ok" and 0.3 < rec["outputs"][0]["shares"]["triton"] < 0.7
    _, _, result = run(fixture("relu_torch_ops"), signed.abs())
    assert result["verdict"] == "torch_fallback"


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * factor, mask=mask)


def triton_relu(x, out=None):
    out = torch.empty_like(x) if out is None else out
    relu_kernel[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out


class Model(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def test_views_copies_and_moves_of_a_triton_result_stay_triton(signed):
    def fn(x):
        y = triton_relu(x.t().contiguous()).t()  # .contiguous() of an input is a copy, not compute
        z = triton_relu(x)
        z.unsqueeze_(0)  # in place, but only metadata
        picked = torch.zeros_like(x)
        picked[x > 0] = z[0][x > 0]  # boolean-mask gather and scatter of Triton values
        return (y.clone().contiguous().reshape(-1), torch.cat([y, y]), y.to(torch.float64), y[1:3],
                torch.stack([y, y]).flip(0), z, picked)
    _, rec, result = run(Model(fn), signed)
    assert result["verdict"] == "ok", result["summary"]
    assert [o["shares"]["triton"] for o in rec["outputs"][:6]] == [1.0] * 6
    positive = float((signed > 0).float().mean())  # the rest of `picked` is zeros_like's
    assert rec["outputs"][6]["shares"] == pytest.approx(dict(alloc=1 - positive, input=0.0, aten=0.0, library=0.0,
                                                            triton=positive))


def test_masked_assignment_of_a_torch_result_is_pytorch(signed):
    def fn(x):
        triton_relu(x[:1].contiguous())
        out = torch.zeros_like(x)
        out[x > 0] = torch.exp(x)[x > 0]
        return out
    _, rec, result = run(Model(fn), signed)
    assert result["verdict"] == "torch_fallback"
    assert rec["outputs"][0]["writers"] == {"aten": "exp"}


def test_copy_of_input_into_output_is_not_pytorch_compute(signed):
    def fn(x):
        triton_relu(x)
        out = torch.empty_like(x)
        out.copy_(x)
        return out
    _, rec, result = run(Model(fn), signed)
    assert result["verdict"] == "ok"
    assert rec["outputs"][0]["shares"]["input"] == 1.0


@pytest.mark.parametrize("case", ["epilogue", "reads_torch_result", "poke_one_element", "torch_rows", "nudge",
                                  "clone_of_torch"])
def test_pytorch_results_laundered_through_triton_are_caught(signed, case):
    def fn(x):
        if case == "epilogue":  # Triton result, then a PyTorch op rewrites all of it in place
            y = triton_relu(x)
            y.mul_(2.0)
            return y
        if case == "reads_torch_result":  # the launch merely receives (reads) the PyTorch result
            y = torch.relu(x)
            triton_relu(y, out=torch.empty_like(y))
            return y
        if case == "poke_one_element":  # Triton changes one element of PyTorch's result
            y = torch.relu(x)
            z = y.view(-1)[:1]
            relu_kernel[(1,)](z - 5.0, z, 1, BLOCK=64)
            return y
        if case == "torch_rows":  # PyTorch computes all rows but the last, Triton the last (1 in 40)
            x = x.reshape(40, 20)
            out = torch.empty_like(x)
            out[:-1] = torch.relu(x[:-1])
            out[-1:] = triton_relu(x[-1:].contiguous())
            return out
        if case == "nudge":  # Triton rescales PyTorch's result by less than the tolerance
            y = torch.relu(x)
            out = torch.empty_like(y)
            scale_kernel[(triton.cdiv(y.numel(), 64),)](y, out, y.numel(), 1.0 + 1e-4, BLOCK=64)
            return out
        y = torch.relu(x)  # clone_of_torch: a token launch, then a copy of PyTorch's result
        triton_relu(x[:1].contiguous())
        return y.clone()
    _, rec, result = run(Model(fn), signed)
    assert result["verdict"] == "torch_fallback", (case, result["summary"])


def test_triton_work_on_a_pytorch_result_is_credited(signed):
    # a real computation on a PyTorch-computed tensor (x * 3, far beyond the tolerance) is Triton's
    def fn(x):
        y = torch.relu(x)
        out = torch.empty_like(y)
        scale_kernel[(triton.cdiv(y.numel(), 64),)](y, out, y.numel(), 3.0, BLOCK=64)
        return out
    _, rec, result = run(Model(fn), signed)
    zeros = float((torch.relu(signed) == 0).float().mean())  # 0 * 3 == 0: those elements are copies
    assert result["verdict"] == "ok", result["summary"]
    assert rec["outputs"][0]["shares"]["triton"] == pytest.approx(1 - zeros)


def test_fresh_buffers_hold_the_sentinel(signed):
    # empty buffers are filled with NaN so that a recycled buffer that already holds the right values
    # cannot pass for a Triton write; an untouched one is reported as never written
    def fn(x):
        triton_relu(x)
        return torch.empty_like(x)
    out, rec, result = run(Model(fn), signed)
    assert bool(torch.isnan(out).all())
    assert rec["outputs"][0]["shares"]["alloc"] == 1.0 and result["verdict"] == "ok"


def test_launch_hooks_are_removed_even_when_the_forward_raises(signed):
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    before = (InterpretedFunction.__dict__["run"], JITFunction.__dict__["run"])

    def fn(x):
        triton_relu(x)
        raise ValueError("kernel bug")
    with pytest.raises(ValueError):
        audit.audited_forward(Model(fn), [signed], "cpu", [])
    assert (InterpretedFunction.__dict__["run"], JITFunction.__dict__["run"]) == before


def test_op_list_is_capped(signed, monkeypatch):
    monkeypatch.setattr(audit, "MAX_OPS", 2)

    def fn(x):
        return triton_relu(torch.sin(torch.cos(torch.exp(torch.abs(x)))))
    _, rec, _ = run(Model(fn), signed)
    assert len(rec["aten_ops"]) == 2 and rec["aten_ops_dropped"] >= 3


def test_no_launch_forward_is_torch_fallback(signed):
    _, rec, result = run(Model(torch.relu), signed)
    assert rec["triton_launches"] == 0 and result["verdict"] == "torch_fallback"
    assert rec["outputs"][0]["shares"]["aten"] == 1.0
