"""Audit of one ModelNew forward: what ran in Triton, what ran in PyTorch, and who wrote the outputs.

Worker side (untrusted process, torch): `audited_forward(model, inputs, device, jit_kernel_names)` runs
the forward once with every aten op and Triton launch observed and returns (outputs, record).
Judge side (trusted, no torch): `classify(record, device_is_gpu)` validates the record and rules.

Provenance is kept per ELEMENT: a shadow byte per storage byte holds the label of the last meaningful
writer: alloc (allocated or constant-filled, never computed), input (storage from before the forward:
inputs, parameters), aten (PyTorch compute), library (PyTorch GEMM/conv/attention), triton.
- aten ops come through a TorchDispatchMode; what they write comes from the op schema (fresh returns
  and `(a!)` arguments). Copies and data movement (copy_, clone, cat, gather...) carry their source's
  labels, so `.contiguous()`, views and copies of inputs never make an output PyTorch's.
- Triton writes are found by comparing each tensor argument before and after the launch: an element
  is written only if its bytes changed, so a launch that merely reads PyTorch's result gains nothing.
  Fresh `empty*` buffers are filled with 0xFF bytes (NaN / -1; uninitialised memory may hold
  anything) so that a recycled buffer already holding the right values still shows the writes.
- A launch whose writes all lie within the evaluation's tolerance of one source (the tensor's own
  previous values, or another argument of the launch) wrote nothing the evaluation could miss: the
  values keep that source's labels. This catches Triton copies, nudges and "recomputations" of a
  result PyTorch handed to the kernel. Elements copied bit-for-bit from PyTorch-computed arguments
  keep their labels too (a launch that copies most of torch's result and computes a sliver).
Not seen: values moved to other positions by Triton (a transpose of torch's result counts as Triton
work), and invertible obfuscation over several launches (add 1, then subtract it). Run the audit on
inputs with negative values: an honest ReLU of non-negative inputs IS a copy. The record is only as
honest as the worker (the static checks forbid the patching needed to forge it); `classify` survives
any record.

Record schema (version 1), plain JSON:
  {"version": 1, "device": "cpu" | "cuda",
   "aten_ops": [{"name": str, "count": int, "kind": "compute"|"library"|"copy"|"alloc"|"view"}],
   "aten_ops_dropped": int,         # distinct op names beyond MAX_OPS (the most frequent are kept)
   "triton_launches": int,          # all launches of the forward
   "launches": [{"name": str, "count": int, "elements_written": int}],     # per kernel name
   "outputs": [{"path": str, "shape": [int], "dtype": str, "numel": int,
                "shares": {"alloc"|"input"|"aten"|"library"|"triton": float},  # of the elements
                "writers": {"aten"|"library"|"triton": str}}],   # last op / kernel of each kind
   "gpu": null | {"measured": false, "reason": str}
        | {"measured": true, "total_us": float, "shares": {"triton"|"library"|"aten"|"copy": float},
           "kernels": [{"name": str, "class": str, "us": float, "count": int}]},
   "errors": [str],                 # bookkeeping failures: the audit is incomplete
   "snapshots": "device" | "host",  # where launches' snapshots were kept ("host": at least one staged)
   "bookkeeping_peak_bytes": int}   # the most device bytes the audit's own bookkeeping held at once
  The last two keys may be absent (records from workers before them); classify accepts both.
"""
import math
import re

VERSION = 1
MAX_OPS, MAX_LAUNCH_NAMES, MAX_OUTPUTS, MAX_KERNELS, MAX_ERRORS, MAX_NAME = 64, 32, 64, 32, 8, 200
# Below this fraction a part of the work is not "meaningful": Triton must compute at least this much
# of every output that PyTorch computes any of, and on GPU hold this much of the time when aten dominates.
MEANINGFUL = 0.10
ATEN_DOMINANT = 0.5  # GPU: non-library PyTorch kernels with this share of the time "dominate"
COPY_RTOL = 1e-6     # per element "the same value": a copy, a few float32 ulps of slack

ALLOC, INPUT, ATEN, LIBRARY, TRITON = range(5)
LABELS = ("alloc", "input", "aten", "library", "triton")
GPU_CLASSES = ("triton", "library", "aten", "copy")
OP_KINDS = ("compute", "library", "copy", "alloc", "view")

# aten ops (overload packet names) that allocate or write constants: not compute.
SENTINEL_OPS = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
ALLOC_OPS = SENTINEL_OPS | {"zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full",
                            "full_like", "new_full", "fill", "fill_", "zero", "zero_", "scalar_tensor",
                            "arange", "linspace", "eye", "lift_fresh_copy"}
# Data movement: the written tensor takes its source's labels, moved the same way.
MOVE_OPS = {"index", "index_select", "gather", "flip", "roll", "repeat"}  # rerun on the labels of self
COPY_OPS = MOVE_OPS | {"copy_", "copy", "_copy_from", "_copy_from_and_resize", "clone", "_to_copy",
                       "cat", "stack", "index_put", "index_put_"}
# In-place metadata changes (schema `Tensor(a!)`, but no element is written).
META_OPS = {"t_", "transpose_", "squeeze_", "unsqueeze_", "as_strided_", "swapdims_", "swapaxes_",
            "detach_", "set_", "resize_", "resize_as_", "_resize_output_"}
LIBRARY_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "matmul", "linear",
               "_scaled_mm", "_int_mm", "_addmm_activation", "_cudnn_rnn", "mkldnn_rnn_layer"}
# GPU kernels: Triton ones by exact name only (the candidate's own JIT functions); inductor's
# "triton_*" kernels are generated from PyTorch ops and fall through to aten.
LIBRARY_KERNEL = re.compile(r"gemm|gemv|cublas|cutlass|cudnn|xmma|nvjet|convolution|implicit_convolve|"
                            r"fprop|dgrad|wgrad|flash|fmha|cutensor|magma|^sm\d+_", re.I)
COPY_KERNEL = re.compile(r"memcpy|memset|copy|FillFunctor", re.I)


def op_kind(name):
    if name in META_OPS:
        return "view"
    if name in ALLOC_OPS:
        return "alloc"
    if name in COPY_OPS:
        return "copy"
    return "library" if name in LIBRARY_OPS or "convolution" in name or "attention" in name else "compute"


def kernel_class(name, triton_names):
    if name in triton_names:
        return "triton"
    return "library" if LIBRARY_KERNEL.search(name) else "copy" if COPY_KERNEL.search(name) else "aten"


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------

def _tensors(value, out):
    import torch
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (list, tuple, dict)):
        for v in (value.values() if isinstance(value, dict) else value):
            _tensors(v, out)
    elif isinstance(getattr(value, "base", None), torch.Tensor):  # a Triton TensorDescriptor
        out.append(value.base)
    return out


def _close(a, b, atol, rtol):
    """Per element of the flattened tensors: b within tolerance of a (NaN matches NaN)."""
    import torch
    a, b = a.reshape(-1), b.reshape(-1)
    if a.is_complex() or b.is_complex() or not (a.is_floating_point() or b.is_floating_point()):
        return a == b
    dtype = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    return torch.isclose(b.to(dtype), a.to(dtype), rtol=rtol, atol=atol, equal_nan=True)


class _Audit:
    def __init__(self, atol, rtol):
        self.atol, self.rtol, self.paused = atol, rtol, False
        self.shadows = {}    # storage data_ptr -> [uint8 label per storage byte, {kind: writer}]
        self.ops = {}        # op name -> [count, kind]
        self.launches = {}   # kernel name -> [count, elements credited to Triton]
        self.compiled_names, self.errors = set(), []

    def error(self, where, exc):
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(("%s: %s: %s" % (where, type(exc).__name__, exc))[:MAX_NAME])

    def _entry(self, t, create, fresh=False):
        import torch
        st = t.untyped_storage()
        entry = self.shadows.get(st.data_ptr())
        if fresh or (entry is not None and entry[0].numel() != st.nbytes()):
            entry = None  # a new storage, possibly at a recycled address
        if entry is None and (create or fresh):
            entry = [torch.full((st.nbytes(),), ALLOC if fresh else INPUT, dtype=torch.uint8, device=t.device), {}]
            self.shadows[st.data_ptr()] = entry
        return entry

    @staticmethod
    def _bytes(shadow, t):
        size = t.element_size()
        return shadow.as_strided(list(t.shape) + [size], [s * size for s in t.stride()] + [1],
                                 t.storage_offset() * size)

    def labels(self, t):
        import torch
        entry = self._entry(t, False)
        if entry is None:
            return torch.full(t.shape, INPUT, dtype=torch.uint8, device=t.device)
        return self._bytes(entry[0], t)[..., 0].clone()

    def writers(self, t):
        entry = self._entry(t, False)
        return dict(entry[1]) if entry else {}

    def set_labels(self, t, labels, writers):
        entry = self._entry(t, True)
        view = self._bytes(entry[0], t)
        if isinstance(labels, int):
            view.fill_(labels)
        else:
            view.copy_(labels.to(view.device).expand(t.shape).unsqueeze(-1).expand(view.shape))
        entry[1].update(writers)

    def on_op(self, func, args, kwargs, out):
        """Called from the dispatch mode after the op ran (the mode is off meanwhile)."""
        import torch
        name, schema = func.overloadpacket.__name__, func._schema
        written = []
        for i, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.is_write:
                _tensors(args[i] if i < len(args) else kwargs.get(arg.name), written)
        in_ptrs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs), [])}
        fresh = []
        for ret, value in zip(schema.returns, out if len(schema.returns) > 1 else (out,)):
            if ret.alias_info is None:  # views (annotated returns) share their input's storage
                fresh += [t for t in _tensors(value, []) if t.untyped_storage().data_ptr() not in in_ptrs]
        kind = op_kind(name) if written or fresh else "view"
        self.ops.setdefault(name, [0, kind])[0] += 1
        if kind == "view":
            return
        fresh = [t for t in fresh if t.numel() > 0]
        for t in fresh:
            self._entry(t, True, fresh=True)
        targets = fresh + [t for t in written if t.numel() > 0]
        if kind == "alloc":
            for t in targets:
                self.set_labels(t, ALLOC, {})
            for t in fresh if name in SENTINEL_OPS else ():
                raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())
                raw.fill_(1 if t.dtype == torch.bool else 0xFF)
        elif kind == "copy" and not (name.startswith("index_put") and (args[3:4] or [kwargs.get("accumulate")])[0]):
            # the source's labels, moved as the op moved the data (rerun on labels, never into `out`)
            rest = {k: v for k, v in kwargs.items() if k != "out"}
            if name.startswith("_copy_from"):
                sources, targets = [args[0]], [args[1]]
            else:
                sources = [args[1]] if name in ("copy_", "copy") else _tensors(args[0], [])
            if name in ("cat", "stack"):
                moved = func.overloadpacket([self.labels(s) for s in args[0]], *args[1:], **rest)
            elif name in MOVE_OPS:
                moved = func.overloadpacket(self.labels(args[0]), *args[1:], **rest)
            elif name.startswith("index_put"):  # out[mask] = values: values' labels where they land
                sources = [args[0], args[2]]
                moved = torch.index_put(self.labels(args[0]), args[1], self.labels(args[2]))
            else:
                moved = self.labels(sources[0])
            writers = {}
            for s in sources:
                writers.update(self.writers(s))
            for t in targets:
                self.set_labels(t, moved.reshape(t.shape) if moved.numel() == t.numel() else moved, writers)
        else:  # compute (an accumulating index_put included)
            label = LIBRARY if kind == "library" else ATEN
            for t in targets:
                self.set_labels(t, label, {LABELS[label]: name})

    def on_launch(self, name, args, kwargs, run):
        pre, seen = [], set()
        try:
            for t in _tensors((args, {k: v for k, v in kwargs.items() if k != "grid"}), []):
                if id(t) not in seen and t.numel() > 0:
                    seen.add(id(t))
                    pre.append((t, t.detach().clone(), self.labels(t), self.writers(t)))
        except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
            self.error("launch %s" % name, exc)
            pre = []
        result = run()
        stats = self.launches.setdefault(name, [0, 0])
        stats[0] += 1
        if getattr(result, "name", None):  # the compiled kernel's name, as the GPU profiler shows it
            self.compiled_names.add(str(result.name))
        for t, before, labels, writers in pre:
            try:
                stats[1] += self._triton_wrote(name, t, before, labels, writers, pre)
            except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                self.error("launch %s" % name, exc)
        return result

    def _triton_wrote(self, name, t, before, labels, writers, pre):
        """Labels what the launch wrote into argument t; returns the elements credited to Triton."""
        import torch

        def raw(x):
            return x.detach().reshape(-1).contiguous().view(torch.uint8).view(x.numel(), x.element_size())
        changed = (raw(before) != raw(t)).any(1).view(t.shape)
        if not bool(changed.any()):
            return 0
        new = labels.clone()
        same_size = [p for p in pre if p[0] is not t and p[0].numel() == t.numel()]
        for _, values, source_labels, source_writers in [(t, before, labels, writers)] + same_size:
            if bool(_close(values, t, self.atol, self.rtol).view(t.shape)[changed].all()):
                new[changed] = source_labels.reshape(t.shape)[changed]
                self.set_labels(t, new, source_writers)
                return 0
        open_, new_writers = changed, {"triton": name}
        for _, values, source_labels, source_writers in same_size:
            source_labels = source_labels.reshape(t.shape)
            copied = (open_ & _close(values, t, 0.0, COPY_RTOL).view(t.shape)
                      & ((source_labels == ATEN) | (source_labels == LIBRARY)))
            if bool(copied.any()):
                new[copied] = source_labels[copied]
                new_writers.update({k: v for k, v in source_writers.items() if k != "triton"})
                open_ = open_ & ~copied
        new[open_] = TRITON
        self.set_labels(t, new, new_writers)
        return int(open_.sum())

    def output_entry(self, path, t):
        import torch
        counts = torch.bincount(self.labels(t).reshape(-1).long().cpu(), minlength=len(LABELS)).tolist()
        return {"path": path[:MAX_NAME], "shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                "numel": t.numel(), "shares": {k: c / max(t.numel(), 1) for k, c in zip(LABELS, counts)},
                "writers": {k: str(v)[:MAX_NAME] for k, v in self.writers(t).items()}}


def _leaves(value, path, out):
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _leaves(v, "%s[%d]" % (path, i), out)
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            _leaves(value[k], "%s[%r]" % (path, k), out)
    else:
        out.append((path, value))
    return out


def audited_forward(model, inputs, device, jit_kernel_names, atol=1e-2, rtol=1e-2):
    """Runs model(*inputs) once under audit under torch.no_grad(); returns (outputs, record).
    atol/rtol: the evaluation's tolerance (what the output would have been accepted within).
    The GPU time split comes from gpu_time(), in a separate forward."""
    import contextlib
    import torch
    import triton.runtime.jit as jit
    from torch.utils import _python_dispatch
    from torch.utils._python_dispatch import TorchDispatchMode
    # Off the dispatch stack during launches: the interpreter's tensor traffic would cost ~ms an op.
    # (private; the `paused` flag keeps the audit right without it)
    unmode = getattr(_python_dispatch, "_disable_current_modes", contextlib.nullcontext)

    classes = [jit.JITFunction]
    try:  # under TRITON_INTERPRET=1 launches go through the interpreter's class (it needs numpy)
        import triton.runtime.interpreter as interpreter
        classes.append(interpreter.InterpretedFunction)
    except ImportError:
        pass
    audit = _Audit(atol, rtol)

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if not audit.paused:
                try:
                    audit.on_op(func, args, kwargs, out)
                except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                    audit.error("aten.%s" % func, exc)
            return out

    def hook(original):
        def run(fn, *args, **kwargs):
            if kwargs.get("warmup") or audit.paused:
                return original(fn, *args, **kwargs)
            name = str(getattr(getattr(fn, "fn", None), "__name__", type(fn).__name__))[:MAX_NAME]
            audit.paused = True  # the interpreter's tensor traffic and our snapshots are not the model's
            try:
                with unmode():
                    return audit.on_launch(name, args, kwargs, lambda: original(fn, *args, **kwargs))
            finally:
                audit.paused = False
        return run

    saved = [(cls, "run" in cls.__dict__, cls.run) for cls in classes]
    try:
        for cls, _, original in saved:
            cls.run = hook(original)
        with torch.no_grad(), Mode():
            outputs = model(*inputs)
        audit.paused = True
        entries = [audit.output_entry(path, leaf) for path, leaf in _leaves(outputs, "out", [])[:MAX_OUTPUTS]
                   if isinstance(leaf, torch.Tensor)]
    finally:
        for cls, own, original in saved:
            if own:
                cls.run = original
            else:
                del cls.run
    ops = sorted(audit.ops.items(), key=lambda kv: -kv[1][0])
    launches = sorted(audit.launches.items(), key=lambda kv: -kv[1][0])
    device = torch.device(device)
    record = {
        "version": VERSION, "device": device.type,
        "aten_ops": [{"name": n[:MAX_NAME], "count": c, "kind": k} for n, (c, k) in ops[:MAX_OPS]],
        "aten_ops_dropped": max(0, len(ops) - MAX_OPS),
        "triton_launches": sum(c for c, _ in audit.launches.values()),
        "launches": [{"name": n, "count": c, "elements_written": w} for n, (c, w) in launches[:MAX_LAUNCH_NAMES]],
        "outputs": entries, "gpu": None, "errors": audit.errors,
    }
    # On CUDA the judge asks for gpu_time() in a second forward on fresh inputs and puts it
    # into record["gpu"]: the audit's own clones and comparisons would pollute GPU time here.
    return outputs, record


def gpu_time(model, inputs, triton_names):
    """GPU time per kernel class over one plain forward (the judge gives it fresh inputs, so
    a memoizing kernel cannot answer it from a cache), or why it could not be measured.

    CUDA events bracket every Triton launch and every PyTorch operator on the current
    stream: no profiler (CUPTI took ~6 s to start in every fresh worker, twelve times the
    whole evaluation's overhead budget), and the same classes as the profiler's kernel names
    would give. Work put on another stream is not seen here; the judge's clock catches it."""
    try:
        import torch
        import triton.runtime.jit as jit
        from torch.utils._python_dispatch import TorchDispatchMode

        spans = []  # (name, class, start event, end event)

        def bracket(name, cls, call):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            try:
                return call()
            finally:
                end.record()
                if len(spans) < 100000:
                    spans.append((name, cls, start, end))

        class Timer(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                kind = op_kind(name)
                if kind in ("alloc", "view"):
                    return func(*args, **(kwargs or {}))
                cls = {"library": "library", "copy": "copy"}.get(kind, "aten")
                return bracket(name, cls, lambda: func(*args, **(kwargs or {})))

        original = jit.JITFunction.run

        def run(fn, *args, **kwargs):
            if kwargs.get("warmup"):
                return original(fn, *args, **kwargs)
            name = str(getattr(getattr(fn, "fn", None), "__name__", "triton"))[:MAX_NAME]
            return bracket(name, "triton", lambda: original(fn, *args, **kwargs))

        own = "run" in jit.JITFunction.__dict__
        torch.cuda.synchronize()
        jit.JITFunction.run = run
        try:
            with torch.no_grad(), Timer():
                model(*inputs)
        finally:
            if own:
                jit.JITFunction.run = original
            else:
                del jit.JITFunction.run
        torch.cuda.synchronize()
        kernels = {}
        for name, cls, start, end in spans:
            entry = kernels.setdefault((name, cls), [0.0, 0])
            entry[0] += 1000.0 * start.elapsed_time(end)
            entry[1] += 1
        total = sum(us for us, _ in kernels.values())
        if not total > 0:
            return {"measured": False, "reason": "no GPU work was recorded on the current stream"}
        shares, listed = dict.fromkeys(GPU_CLASSES, 0.0), []
        for (name, cls), (us, count) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
            shares[cls] += us / total
            listed.append({"name": name[:MAX_NAME], "class": cls, "us": us, "count": count})
        return {"measured": True, "total_us": total, "shares": shares, "kernels": listed[:MAX_KERNELS]}
    except Exception as exc:  # noqa: BLE001 -- the GPU split is optional: say why it is missing
        return {"measured": False, "reason": ("%s: %s" % (type(exc).__name__, exc))[:MAX_NAME]}


# ---------------------------------------------------------------------------
# Judge side: pure Python; the record comes from the untrusted worker
# ---------------------------------------------------------------------------

def _count(v):
    return type(v) is int and 0 <= v < 1 << 62


def _number(v):
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


def _fraction(v):
    return _number(v) and v <= 1.0


def _name(v):
    return type(v) is str and len(v) <= MAX_NAME


def _one_of(*values):
    return lambda v: any(type(v) is type(x) and v == x for x in values)


def _shares(keys):
    return lambda v: (isinstance(v, dict) and set(v) == set(keys) and all(_fraction(x) for x in v.values())
                      and sum(v.values()) <= 1 + 1e-6)


class _Optional:
    """In a {key: spec}: the key may be absent (records of workers from before it)."""

    def __init__(self, spec):
        self.spec = spec


def _ok(value, spec):
    """spec: a predicate, {key: spec} (these keys, those marked _Optional may be absent) or [cap, item spec]."""
    if isinstance(spec, dict):
        required = {k for k, s in spec.items() if not isinstance(s, _Optional)}
        return (isinstance(value, dict) and required <= set(value) <= set(spec)
                and all(_ok(value[k], spec[k].spec if isinstance(spec[k], _Optional) else spec[k]) for k in value))
    if isinstance(spec, list):
        return isinstance(value, list) and len(value) <= spec[0] and all(_ok(v, spec[1]) for v in value)
    return spec(value)


OUTPUT_SPEC = {"path": _name, "shape": [16, _count], "dtype": _name, "numel": _count, "shares": _shares(LABELS),
               "writers": lambda v: (isinstance(v, dict) and set(v) <= {"aten", "library", "triton"}
                                     and all(_name(w) for w in v.values()))}
GPU_SPECS = ({"measured": _one_of(False), "reason": _name},
             {"measured": _one_of(True), "total_us": lambda v: _number(v) and 0 < v < 1e15,
              "shares": _shares(GPU_CLASSES),
              "kernels": [MAX_KERNELS, {"name": _name, "class": _one_of(*GPU_CLASSES), "us": _number, "count": _count}]})
RECORD_SPEC = {
    "version": _one_of(VERSION), "device": _one_of("cpu", "cuda"),
    "aten_ops": [MAX_OPS, {"name": _name, "count": _count, "kind": _one_of(*OP_KINDS)}],
    "aten_ops_dropped": _count, "triton_launches": _count,
    "launches": [MAX_LAUNCH_NAMES, {"name": _name, "count": _count, "elements_written": _count}],
    "outputs": [MAX_OUTPUTS, OUTPUT_SPEC],
    "gpu": lambda v: v is None or any(_ok(v, s) for s in GPU_SPECS),
    "errors": [MAX_ERRORS, _name],
    "snapshots": _Optional(_one_of("device", "host")), "bookkeeping_peak_bytes": _Optional(_count),
}


def _validate(record, device_is_gpu):
    """The first problem with the record, or None."""
    if not _ok(record, RECORD_SPEC):
        return "it does not follow the schema"
    if record["device"] != ("cuda" if device_is_gpu else "cpu"):
        return "its device is not the evaluation's"
    if sum(x["count"] for x in record["launches"]) > record["triton_launches"]:
        return "its launch counts exceed its total"
    if any(o["numel"] > 0 and abs(sum(o["shares"].values()) - 1) > 1e-6 for o in record["outputs"]):
        return "an output's shares do not add up"
    gpu = record["gpu"]
    if gpu and gpu["measured"] and (abs(sum(gpu["shares"].values()) - 1) > 1e-6
                                    or any(k["us"] > gpu["total_us"] * (1 + 1e-6) for k in gpu["kernels"])):
        return "its GPU times do not add up"
    return None


def _percent(share):
    # never round a sliver away: "<1%" and ">99%" say that the other part is not nothing
    return "<1%" if 0 < share < 0.005 else ">99%" if 0.995 <= share < 1 else "%d%%" % round(share * 100)


def _describe_output(o):
    words = {"alloc": "never written", "input": "copied from inputs", "aten": "PyTorch",
             "library": "PyTorch library", "triton": "Triton"}
    parts = ["%s %s%s" % (_percent(o["shares"][k]), words[k], " (%s)" % o["writers"][k] if k in o["writers"] else "")
             for k in sorted(LABELS, key=lambda k: -o["shares"][k]) if o["shares"][k] > 0]
    return "%s: %s" % (o["path"], ", ".join(parts) or "empty")


def _result(verdict, summary, shares, details):
    return {"verdict": verdict, "summary": summary[:1000], "triton_share": shares.get("triton"),
            "library_share": shares.get("library"), "aten_share": shares.get("aten"), "details": details}


def classify(record, device_is_gpu):
    """Verdict on an audit record: "ok", "torch_fallback", or "malformed" (with the reason)."""
    try:
        problem = _validate(record, device_is_gpu)
    except (RecursionError, TypeError, ValueError, OverflowError) as exc:  # hostile nesting, huge ints
        problem = "it cannot be read (%s)" % type(exc).__name__
    if problem:
        return _result("malformed", "audit record rejected: " + problem, {}, {"reason": problem})
    if record["errors"]:
        # An audit that lost track of the forward cannot vouch for it; failing closed also means a
        # kernel gains nothing by making the audit trip.
        reason = "the audit could not follow the forward: " + record["errors"][0]
        return _result("malformed", reason, {}, {"reason": reason, "errors": record["errors"]})

    compute_ops = sum(o["count"] for o in record["aten_ops"] if o["kind"] in ("compute", "library"))
    launches = ", ".join("%s x%d" % (x["name"], x["count"]) for x in record["launches"][:4])
    gpu, shares = record["gpu"], {}
    if gpu and gpu["measured"]:
        shares = gpu["shares"]
        parts = ["Triton kernels: %s of GPU time; cuBLAS/cuDNN: %s; other PyTorch kernels: %s; copies: %s"
                 % tuple(_percent(shares[k]) for k in GPU_CLASSES)]
    else:
        parts = ["%d Triton launch(es)%s, %d PyTorch compute op(s)"
                 % (record["triton_launches"], " (%s)" % launches if launches else "", compute_ops)]
        if gpu:
            parts.append("GPU time not measured: " + gpu["reason"])
    parts += [_describe_output(o) for o in record["outputs"][:4]]
    details = {"triton_launches": record["triton_launches"], "aten_compute_ops": compute_ops,
               "launches": record["launches"], "outputs": record["outputs"], "gpu": gpu}

    reasons = []
    if record["triton_launches"] == 0:
        reasons.append("no Triton kernel was launched")
    for o in record["outputs"]:
        # PyTorch's output: PyTorch (aten or a library) computed a meaningful part of it and Triton
        # less than that. Allocations, views, .contiguous() and copies of inputs are not PyTorch
        # compute; a Triton copy of PyTorch's result is. An aten epilogue on a Triton result (Triton
        # GEMM, then `out + bias` in torch) counts as PyTorch's as well: allowing it would let a
        # trivial Triton pre-pass launder any torch op. The repair prompt can name the op (writers).
        pytorch = o["shares"]["aten"] + o["shares"]["library"]
        if o["numel"] > 0 and o["shares"]["triton"] < MEANINGFUL <= pytorch:
            reasons.append("%s was computed by PyTorch (%s), Triton wrote %s of it"
                           % (o["path"], _percent(pytorch), _percent(o["shares"]["triton"])))
    if shares and shares["triton"] < MEANINGFUL and shares["aten"] >= ATEN_DOMINANT:
        # Library GEMM/conv time is not held against a kernel (hybrids are legal); plain PyTorch
        # compute kernels dwarfing the Triton ones mean the Triton part is decoration.
        reasons.append("Triton kernels hold %s of GPU time, other PyTorch kernels %s"
                       % (_percent(shares["triton"]), _percent(shares["aten"])))
    if reasons:
        details["reasons"] = reasons
        return _result("torch_fallback", "; ".join(reasons + parts), shares, details)
    return _result("ok", "; ".join(parts), shares, details)
