"""Audit of one ModelNew forward: what ran in Triton, what ran in PyTorch, and who wrote the outputs.

Worker side (untrusted process, torch): `audited_forward(model, inputs, device, jit_kernel_names,
atol=, rtol=, seed=)` runs the forward once with every aten op and Triton launch observed and returns
(outputs, record). Judge side (trusted, no torch): `audit_rules.classify(record, device_is_gpu)`
validates the record and rules.

Provenance is kept per ELEMENT: a shadow byte per element of each storage (of the element size the
storage is first seen with; see _Shadow for views of other sizes) holds the label of the last meaningful
writer: alloc (allocated or constant-filled, never computed), input (a storage from before the forward:
inputs, parameters, buffers), aten (PyTorch compute), library (PyTorch GEMM/conv/attention), triton,
and unseen (written where the audit could not see). The label numbers are their merge order, from
Triton's to the most suspect: triton < alloc < input < aten < library < unseen.
- aten ops come through a TorchDispatchMode; what they write comes from the op schema (fresh returns
  and `(a!)` arguments). Copies and data movement (copy_, clone, cat, gather...) carry their source's
  labels, so `.contiguous()`, views and copies of inputs never make an output PyTorch's.
- Triton writes are found by comparing each tensor argument before and after the launch: an element
  is written only if its bytes changed, so a launch that merely reads PyTorch's result gains nothing.
  Fresh `empty*` buffers are filled with 0xFF bytes (NaN / -1; uninitialised memory may hold
  anything) so that a recycled buffer already holding the right values still shows the writes.

What the audit does not see (fails closed, label unseen): the dispatch mode misses numpy, other
Python threads (modes are per thread), PyTorch under `torch._C._DisableTorchDispatch()`, and Triton
writes outside the launch's tensor arguments (raw pointers). Two defences:
- Inventory: as the forward begins, every storage that exists (the garbage collector's tensors and
  storages, the inputs, the model's parameters and buffers) is recorded and HELD until the audit ends
  (its address cannot be recycled). A storage with no labels is "input" only if inventoried; any
  other (`torch.from_numpy(...)`, `torch.tensor(ndarray)`, a result made in another thread or with
  dispatch disabled) is unseen. Shadows hold a weak reference to their storage: labels of a freed
  storage never pass to a new one at its address.
- Content digests (digest.words_digest, one per DIGEST_CHUNK_BYTES of a storage) of every storage
  the audit knows: taken at the inventory, taken whole for a storage an op makes, and moved by the
  seen writes themselves (an aten op: the written spans' digests before it, from before_op, and after
  it; a launch: its snapshot's and the storage's, per changed byte range): the record follows the seen
  writes only, never "whatever is there now", so a write the audit missed stays a difference even
  when a seen write lands in the same chunk later. Digests are checked (verify) before a launch, a
  copy or a library op reads a storage, and for every output at the end (after a device sync); a
  chunk that differs becomes unseen. Bytes a launch changed inside its arguments' byte ranges but
  outside their elements (a strided view's gaps, alignment padding) become unseen as well (seal).
classify refuses any output with unseen elements: honest kernels compute in Triton on forward's thread.

Where written values come from (relabel), in this order; the extra comparisons run only for what
the earlier ones left to Triton:
1. Sources handed to the launch: the tensor's own previous values, every other tensor argument (of
   any size: position k against position k, up to the shorter), and storages reached through integer
   arguments (raw pointers, `t.data_ptr()` cast to a pointer in the kernel; read flat from the
   pointed element in the float dtype PyTorch last wrote them as). If ALL changed elements lie within
   the evaluation's tolerance of one source, they take its labels (a copy, a nudge).
2. Moved values: if the launch's values are a permutation of a same-size source's (a handed one or a
   tracked storage) that may hold aten or unseen labels (a transpose back, permute then unpermute
   over two launches), they take its labels in its order (so the shares are exactly the source's).
   Told by float64 moments over all elements, chunk by chunk: the counts (finite, NaN, +/-inf), sum,
   sum of squares, sum of cubes, min and max, each within MOMENT_RTOL (1e-6) of the corresponding
   absolute moment (sum |x|, sum x^2, sum |x|^3, max |x|); a constant source never matches.
   False positives: values an honest kernel COMPUTES would have to agree with a PyTorch tensor of the
   same size in all six moments to one part in a million, which independent data does not do (two
   layer norms' outputs share sum ~0 and sum of squares ~n but not to 1e-6, nor their cubes and
   extremes); what it does match is a rearrangement (a Triton sort, gather or transpose of PyTorch's
   result), which is PyTorch's output moved, and refused as such.
3. Element by element: a changed element within tolerance of a handed source's value at its position
   keeps that source's aten or unseen label; then one holding the SAME value (TIGHT_RTOL, atol 0, NaN
   never, exact zeros never) as any other live tracked storage with aten or unseen labels at the same
   position keeps that label (the XOR-mask-then-unmask of PyTorch's result over two launches, a copy
   through pointer arithmetic). Zeros follow such a storage only when it holds at least half the
   launch's other open values (zeros alone are nobody's copy: an honest ReLU's zeros coincide with any
   ReLU's). The rest is Triton's; unseen instead if the launch holds an opaque pointer (an integer
   argument at or above POINTER_FLOOR in no storage the audit knows, or inside a tracked storage freed
   since: what it reads cannot be seen).
Values are read as PyTorch last wrote the storage: a nudge through `y.view(torch.int32)` is a nudge.

The epilogue rule (library): what a launch writes over a LIBRARY-labelled source (cuBLAS, cuDNN:
`F.conv2d`, `torch.matmul`, `F.linear`), and the library-labelled rest of an argument it wrote in
place, is credited to Triton: it is the epilogue, the library call is legal by policy, and a Triton
pass over a library result can only be slower than the library call alone. So `F.conv2d` plus a
Triton Hardtanh is legal whatever the data (most values may come out unchanged). An aten source keeps
its label (a trivial Triton pass must not launder aten compute), and so that a GEMM cannot launder it
either, a library result holding the values of an input with aten or unseen labels (a GEMM with an
identity or permutation matrix) keeps that input's labels (library_copies). Limit: an in-place
epilogue that changes no byte at all is indistinguishable from a read; out of place it is counted.

Not seen: invertible obfuscation of a PyTorch result that is FREED before it is undone (the mask
over two launches of a temporary: nothing is left to compare with), a permutation combined with a
nudge (moments within 1e-6 only), and anything that tampers with the audit itself. Run the audit on
inputs with negative values: an honest ReLU of non-negative inputs IS a copy. The record is only as
honest as the worker (the static checks forbid the patching needed to forge it); `classify` survives
any record.

Memory (the worker shares the GPU with the judge's buffers; KernelBench has 6 GiB tensors): the
audit's extra device bytes are bounded and counted (`bookkeeping_peak_bytes`, `audit_extra_bytes`).
- Labels: one byte per element of each storage written or allocated in the forward (a quarter of the
  bytes of fp32 data); inputs nobody writes have none.
- Snapshots: per launch, one copy of the bytes its tensor arguments cover, per storage (views of one
  storage share it). They are what makes write detection exact, so every argument is copied, read
  or written; an argument found unchanged is read in place afterwards and its copy freed first. When
  the device lacks room for them (beside a margin) they are staged in host memory, pinned if possible,
  and brought back a chunk at a time: `"snapshots": "host"`.
- Everything full-size (change detection, tolerance checks, moments, label updates, digests, output
  shares) walks its tensors CHUNK_ELEMENTS elements (digests: _digest_step() bytes) at a time, in
  logical order: a few chunk-sized temporaries. Digests themselves are host integers; the inventory
  holds storages that exist anyway.
So a ReLU of I input and O output bytes (fp32) holds at most (I + O) + O/4 + one chunk step's
temporaries (I/4 more when it writes its input), against 3-4 x (I + O) before; staged on the host,
the device holds O/4 + a chunk step. A failure of the bookkeeping itself, an OOM included, is recorded
in `errors` (the audit is then incomplete, and classify fails closed), never raised as the kernel's;
an OOM inside the model's forward still propagates.

Record schema (version 2), plain JSON:
  {"version": 2, "device": "cpu" | "cuda",
   "aten_ops": [{"name": str, "count": int, "kind": "compute"|"library"|"copy"|"alloc"|"view"}],
   "aten_ops_dropped": int,         # distinct op names beyond MAX_OPS (the most frequent are kept)
   "triton_launches": int,          # all launches of the forward
   "launches": [{"name": str, "count": int, "elements_written": int}],     # per kernel name
   "outputs": [{"path": str, "shape": [int], "dtype": str, "numel": int,
                "shares": {"triton"|"alloc"|"input"|"aten"|"library"|"unseen": float},  # of the elements
                "writers": {"aten"|"library"|"triton": str},   # last op / kernel of each kind
                "digest": str}],    # digest.tensor_digest(output, seed): 24 hex digits
   "gpu": null | {"measured": false, "reason": str}
        | {"measured": true, "total_us": float, "shares": {"triton"|"library"|"aten"|"copy": float},
           "kernels": [{"name": str, "class": str, "us": float, "count": int}]},
   "errors": [str],                 # bookkeeping failures: the audit is incomplete
   "snapshots": "device" | "host",  # where launches' snapshots were kept ("host": at least one staged)
   "bookkeeping_peak_bytes": int}   # the most device bytes the audit's own bookkeeping held at once
  The last two keys may be absent; classify accepts both. Version 1 (no unseen share, no digest) is
  rejected: such a worker cannot vouch for what it did not see.
"""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import torch

    from .audit_chunks import Key

from . import audit_vocab as vocab
from .audit_chunks import _chunk_cost, _ranges, _flat, _put, _storage_key, _tensors
from .audit_gpu import custom_implementation, gpu_time
from .dispatch_modes import no_dynamo
from .audit_launch import _Launches
from .audit_shadow import _Shadow, _Snapshot, _Source
from .audit_vocab import (ATEN_DOMINANT, DIGEST_WEIGHT_BYTES, GPU_CLASSES, LABELS, MAX_ERRORS, MAX_KERNELS,
                          MAX_LAUNCH_NAMES, MAX_NAME, MAX_OPS, MAX_OUTPUTS, MEANINGFUL, OP_KINDS, VERSION,
                          kernel_class, op_kind)

# The names the worker, the judge and the tests take from here (the audit's parts live in audit_*.py).
__all__ = ["ATEN_DOMINANT", "DIGEST_WEIGHT_BYTES", "GPU_CLASSES", "LABELS", "MAX_ERRORS", "MAX_KERNELS",
           "MAX_LAUNCH_NAMES", "MAX_NAME", "MAX_OPS", "MAX_OUTPUTS", "MEANINGFUL", "OP_KINDS", "VERSION",
           "audit_extra_bytes", "audited_forward", "custom_implementation", "gpu_time", "kernel_class",
           "no_dynamo", "op_kind", "_Audit", "_Shadow", "_Snapshot", "_Source", "_chunk_cost", "_flat", "_put",
           "_ranges"]


class _Audit(_Launches):
    """One audited forward's bookkeeping: the layers (state, labels, digests, matching, aten ops,
    launches) in audit_*.py, and what exists as the forward begins (take_inventory)."""

    def release_all(self) -> None:
        """Lets go of the inventory and of every label, record and weight (the audit is over)."""
        self.inventory.clear()
        self.shadows.clear()
        self.records.clear()
        self.weights.clear()

    def take_inventory(self, model: Any, inputs: Sequence[Any], harness: Iterable[torch.Tensor] = ()) -> None:
        """The storages that exist as the forward begins: those of every tensor (and storage) the garbage
        collector tracks, of the inputs and of the model's parameters and buffers. Held for the audit's
        duration, so that no storage made later can take one's address, and digested: a storage with no
        labels is "input" only if it is one of these (else "unseen"), and a write into one that the audit
        did not see shows as a changed digest. `harness`: tensors of the harness's own that no kernel has
        any business with (the L2 flush buffer, the judge's output slots; always the digests' weight
        tables, digest.cached_tables): left out, so they cost no digest, and a forward that takes values
        from them gets "unseen" ones."""
        import gc
        import torch
        tensors, storages = _tensors(list(inputs), []), []
        for method in ("parameters", "buffers"):
            try:
                tensors += list(getattr(model, method)())
            except Exception:  # noqa: BLE001 -- not an nn.Module: the garbage collector finds its tensors
                pass
        # The per-object passes run in C (map, compress): ~300k objects in ~15 ms; in a worker forked
        # after freeze_heap only the objects made since, and the frozen tensors and storages.
        objects = gc.get_objects()
        objects.extend(_FROZEN)
        wanted = _inventoried_types(objects)
        for o in itertools.compress(objects, map(wanted.__contains__, map(type, objects))):
            kind = wanted[type(o)]
            if kind == 1:
                tensors.append(o)
            else:
                storages.append(o if kind == 2 else getattr(o, "_untyped_storage", None))
        del objects
        with torch._C.DisableTorchFunctionSubclass():
            for t in tensors:
                try:
                    storages.append(t.untyped_storage())
                except Exception:  # noqa: BLE001 -- sparse, nested, wrapper tensors: no storage of their own
                    pass
        from .digest import cached_tables
        ours = set()
        for t in itertools.chain(harness, cached_tables()):
            try:
                ours.add(_storage_key(t))
            except Exception:  # noqa: BLE001 -- no storage of its own
                pass
        for st in storages:
            try:
                if st is not None and st.device.type != "meta" and st.nbytes() > 0 \
                        and (st.device, st.data_ptr()) not in ours:
                    self.inventory.setdefault((st.device, st.data_ptr()), st)
            except Exception:  # noqa: BLE001 -- a storage without data
                pass
        for key, st in self.inventory.items():
            self.record(key, st)


# The tensors and storages of the heap frozen before any kernel existed (freeze_heap): the garbage
# collector's get_objects leaves frozen objects out, so every inventory adds these.
_FROZEN: List[Any] = []


def _inventoried_types(objects: Sequence[Any]) -> Dict[type, int]:
    """The distinct types among `objects` the inventory keeps: 1 a tensor, 2 an untyped storage, 3 a
    typed one. By type (no isinstance: an odd object's __class__ may warn or run code), each checked
    once."""
    import torch
    typed = getattr(torch, "TypedStorage", None)
    return {tp: 1 if issubclass(tp, torch.Tensor) else 2 if issubclass(tp, torch.UntypedStorage) else 3
            for tp in set(map(type, objects))
            if issubclass(tp, (torch.Tensor, torch.UntypedStorage)) or (typed is not None and issubclass(tp, typed))}


def freeze_heap() -> None:
    """In the kernels' zygote, before it forks any worker: every object so far (torch's, Triton's,
    the harness's: ~240k in a CPU zygote) moves to the garbage collector's permanent generation,
    which get_objects leaves out, so that an inventory walks only what was made since (the
    kernel's objects among them); the tensors and storages among the frozen are kept in _FROZEN
    for every inventory to add, so that the inventory holds what it held before. A kernel that
    freezes its own objects hides them from the inventory: their values then read "unseen",
    which the audit refuses."""
    import gc
    # No collection first (0.2 s of a one-shot's start): garbage frozen with the rest only stays.
    objects = gc.get_objects()
    kinds = _inventoried_types(objects)
    _FROZEN[:] = [o for o in objects if type(o) in kinds]
    del objects
    gc.freeze()


def _leaves(value: Any, path: str, out: List[Tuple[str, Any]]) -> List[Tuple[str, Any]]:
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _leaves(v, "%s[%d]" % (path, i), out)
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            _leaves(value[k], "%s[%r]" % (path, k), out)
    else:
        out.append((path, value))
    return out


def audit_extra_bytes(inputs: Iterable[torch.Tensor], outputs: Iterable[torch.Tensor] = (),
                      snapshots: str = "device") -> int:
    """The audit's expected extra device bytes at its peak, for a forward over these tensors whose
    Triton launch takes them all (a ReLU: inputs [x], outputs [y]); what `bookkeeping_peak_bytes`
    reports stays within it for such a forward. Per storage: one label byte per element (its shadow)
    and, with snapshots="device", a copy of its bytes (the launch's snapshot; "host": staged in host
    memory, no device bytes); labels once more for the outputs when the launch writes one storage while
    another argument's attribution reads it (several outputs, or one output that is also an input);
    the temporaries of one chunk step (_chunk_cost); and the content digests' weights (at most
    DIGEST_WEIGHT_BYTES: a digest chunk's words'). Not included: storages the forward makes in
    between (each adds its labels, and the launches that take it its snapshot) and ops that move data
    (index, gather, cat...: a transient label byte per element of their operands and result)."""
    storages: Dict[Key, Tuple[int, int]] = {}
    for t in list(inputs) + list(outputs):
        storages.setdefault(_storage_key(t), (t.untyped_storage().nbytes(), t.element_size()))
    if not storages:
        return 0
    labels = {key: -(-nbytes // size) for key, (nbytes, size) in storages.items()}
    written, read = {_storage_key(t) for t in outputs}, {_storage_key(t) for t in inputs}
    frozen = sum(labels[key] for key in written) if len(written) > 1 or written & read else 0
    copies = sum(nbytes for nbytes, _ in storages.values()) if snapshots == "device" else 0
    return (sum(labels.values()) + frozen + copies + DIGEST_WEIGHT_BYTES
            + _chunk_cost(vocab.CHUNK_ELEMENTS, max(size for _, size in storages.values())))


def _launch_classes() -> List[Any]:
    """The Triton classes whose `run` a launch goes through: JITFunction, and under
    TRITON_INTERPRET=1 the interpreter's (it needs numpy)."""
    import triton.runtime.jit as jit
    classes = [jit.JITFunction]
    try:
        import triton.runtime.interpreter as interpreter
        classes.append(interpreter.InterpretedFunction)
    except ImportError:
        pass
    return classes


def _dispatch_mode(audit: _Audit) -> Any:
    """The TorchDispatchMode that shows the audit every aten op of the forward (its failures recorded:
    the audit is then incomplete, the op still runs)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):  # type: ignore[no-untyped-call]  # torch's __init_subclass__ is unannotated
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return no_dynamo()

        def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Optional[Dict[str, Any]] = None) -> Any:
            kwargs = kwargs or {}
            implementation = custom_implementation(func)
            if implementation is not None:
                with self:  # its own ops and launches are the forward's, seen one by one
                    return implementation(*args, **kwargs)
            before = None
            if not audit.paused:
                try:
                    before = audit.before_op(func, args, kwargs)
                except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                    audit.error("aten.%s" % func, exc)
            out = func(*args, **kwargs)
            if not audit.paused:
                try:
                    audit.on_op(func, args, kwargs, out, before)
                except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                    audit.error("aten.%s" % func, exc)
            return out

    return Mode


def _launch_hook(audit: _Audit, launches: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """hook(original run) -> the run that shows the audit every Triton launch of the forward (and notes
    it in `launches`, a compiled.Launches, where given)."""
    from torch.utils import _python_dispatch
    # Off the dispatch stack during launches: the interpreter's tensor traffic would cost ~ms an op.
    # (private; the `paused` flag keeps the audit right without it)
    unmode = getattr(_python_dispatch, "_disable_current_modes", contextlib.nullcontext)

    def hook(original: Callable[..., Any]) -> Callable[..., Any]:
        def run(fn: Any, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("warmup") or audit.paused:
                return original(fn, *args, **kwargs)
            name = str(getattr(getattr(fn, "fn", None), "__name__", type(fn).__name__))[:MAX_NAME]
            audit.paused = True  # the interpreter's tensor traffic and our snapshots are not the model's
            try:
                with unmode():
                    result = audit.on_launch(name, args, kwargs, lambda: original(fn, *args, **kwargs))
                if launches is not None:
                    launches.note(fn, args, kwargs, result)
                return result
            finally:
                audit.paused = False
        return run

    return hook


def _output_entries(audit: _Audit, outputs: Any, seed: int) -> List[Dict[str, Any]]:
    """The record's entries of the forward's tensor outputs (the first MAX_OUTPUTS leaves): every
    output checked for unseen writes first (two may share a storage), then labelled and digested."""
    import torch
    leaves = [(path, leaf) for path, leaf in _leaves(outputs, "out", [])[:MAX_OUTPUTS]
              if isinstance(leaf, torch.Tensor)]
    with torch.no_grad():
        for path, leaf in leaves:
            try:
                audit.unseen_writes(leaf.detach())
            except Exception as exc:  # noqa: BLE001 -- recorded: the audit is then incomplete
                audit.error("output %s" % path[:40], exc)
        entries = []
        for path, leaf in leaves:
            try:
                entries.append(audit.output_entry(path, leaf.detach(), seed))
            except Exception as exc:  # noqa: BLE001 -- the bookkeeping's own failure (an OOM too) is
                audit.error("output %s" % path[:40], exc)  # no failure of the kernel: recorded
    return entries


def _record(audit: _Audit, device_type: str, entries: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The record (schema in the module's docstring) of an audit that has seen the whole forward."""
    ops = sorted(audit.ops.items(), key=lambda kv: -kv[1][0])
    launches = sorted(audit.launches.items(), key=lambda kv: -kv[1][0])
    return {
        "version": VERSION, "device": device_type,
        "aten_ops": [{"name": n[:MAX_NAME], "count": c, "kind": k} for n, (c, k) in ops[:MAX_OPS]],
        "aten_ops_dropped": max(0, len(ops) - MAX_OPS),
        "triton_launches": sum(c for c, _ in audit.launches.values()),
        "launches": [{"name": n, "count": c, "elements_written": w} for n, (c, w) in launches[:MAX_LAUNCH_NAMES]],
        "outputs": entries, "gpu": None, "errors": audit.errors,
        "snapshots": "host" if audit.staged else "device", "bookkeeping_peak_bytes": audit.peak,
    }


def audited_forward(model: Callable[..., Any], inputs: Sequence[Any], device: Any, jit_kernel_names: Iterable[str],
                    atol: float = 1e-2, rtol: float = 1e-2, seed: int = 0, harness: Iterable[torch.Tensor] = (),
                    launches: Any = None) -> Tuple[Any, Dict[str, Any]]:
    """Runs model(*inputs) once under audit under torch.no_grad(); returns (outputs, record).
    atol/rtol: the evaluation's tolerance (what the output would have been accepted within).
    seed: the judge's nonce for the outputs' digests (record["outputs"][k]["digest"]: tensor_digest of
    the values the labels describe, as they are when the forward has returned). harness: the worker's
    own tensors, left out of the inventory (take_inventory). launches: a compiled.Launches that
    notes each Triton launch (its kernel, argument types and constexprs; on a GPU its code).
    The GPU time split comes from gpu_time(), in a separate forward."""
    import torch
    classes = _launch_classes()
    audit = _Audit(atol, rtol, seed)
    inputs = list(inputs)
    mode, hook = _dispatch_mode(audit), _launch_hook(audit, launches)
    device = torch.device(device)
    saved = [(cls, "run" in cls.__dict__, cls.run) for cls in classes]
    try:
        try:
            with torch.no_grad():
                audit.take_inventory(model, inputs, harness)
        except Exception as exc:  # noqa: BLE001 -- the bookkeeping's own failure: recorded
            audit.error("inventory", exc)
        for cls, _, original in saved:
            cls.run = hook(original)
        with torch.no_grad(), mode():
            outputs = model(*inputs)
        audit.paused = True
        if device.type == "cuda":
            torch.cuda.synchronize()  # work still queued (another stream included) lands before the check
        entries = _output_entries(audit, outputs, seed)
    finally:
        for cls, own, original in saved:
            if own:
                cls.run = original
            else:
                del cls.run
        # The storages from before the forward are no longer held, and the bookkeeping goes now: the
        # dispatch mode's class keeps this audit in a reference cycle, which only the cyclic garbage
        # collector would free (and the next audit's inventory would find and digest it meanwhile).
        audit.release_all()
    # On CUDA the judge asks for gpu_time() in a second forward on fresh inputs and puts it
    # into record["gpu"]: the audit's own clones and comparisons would pollute GPU time here.
    return outputs, _record(audit, device.type, entries)
