"""The audit's vocabulary, shared by the worker's side (audit.py and its parts) and the judge's
(audit_rules.py): the record's version and caps, the labels and their merge order, the kinds of aten
ops and GPU kernels, and the bounds of the audit's memory. No torch here."""

from __future__ import annotations

import re
from typing import AbstractSet



VERSION = 2
MAX_OPS, MAX_LAUNCH_NAMES, MAX_OUTPUTS, MAX_KERNELS, MAX_ERRORS, MAX_NAME = 64, 32, 64, 32, 8, 200
# Below this fraction a part of the work is not "meaningful": Triton must compute at least this much
# of every output that PyTorch computes any of, and on GPU hold this much of the time when aten dominates.
MEANINGFUL = 0.10
ATEN_DOMINANT = 0.5  # GPU: non-library PyTorch kernels with this share of the time "dominate"
# Memory: the audit's full-size work goes CHUNK_ELEMENTS elements at a time (its temporaries are a
# few chunks, see _chunk_cost); a launch's snapshots stay on the device only with this much left free
# beside them: SNAPSHOT_MARGIN_BYTES plus SNAPSHOT_MARGIN_FRACTION of their size plus one chunk step.
CHUNK_ELEMENTS = 1 << 24
SNAPSHOT_MARGIN_BYTES = 1 << 30
SNAPSHOT_MARGIN_FRACTION = 0.10
HOST_COPY_BYTES = 1 << 26  # one step of a copy into host staging
# Content digests (unseen writes): one per DIGEST_CHUNK_BYTES of a storage (words_digest's), computed
# in passes of at most _digest_step() bytes whose temporaries are charged DIGEST_BYTE_COST device
# bytes a byte (the bytes' copy onto the device, their float64 halves: about 5 a byte).
DIGEST_CHUNK_BYTES = 1 << 20
DIGEST_BYTE_COST = 16
DIGEST_WEIGHT_BYTES = 16 * DIGEST_CHUNK_BYTES  # held: digest.block_table, (2 halves x 4) float64 a word
# On the CPU, passes below torch's parallel grain (32k elements): on few, busy cores the intra-op
# thread handoff costs far more than the work (a 256 KiB digest: 70 ms in one pass, 2 ms in four).
CPU_DIGEST_BYTES = 1 << 16
# "The same values" where nothing handed them to the launch (a tracked storage at the same positions,
# a permutation's moments): far tighter than the evaluation's tolerance.
TIGHT_RTOL = 1e-6
MOMENT_RTOL = 1e-6
# An integer launch argument at least this large that lies in no storage the audit knows, or one inside
# a storage tracked in this forward and freed since, is an opaque pointer: what it reads is unseen.
POINTER_FLOOR = 1 << 40

# Label numbers ARE the merge order of the parts of one shadow cell (see _Shadow): a merge keeps the
# highest, i.e. the most suspect. Triton lowest, then alloc, input, aten, library, and unseen highest.
TRITON, ALLOC, INPUT, ATEN, LIBRARY, UNSEEN = range(6)
LABELS = ("triton", "alloc", "input", "aten", "library", "unseen")
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


def op_kind(name: str) -> str:
    if name in META_OPS:
        return "view"
    if name in ALLOC_OPS:
        return "alloc"
    if name in COPY_OPS:
        return "copy"
    return "library" if name in LIBRARY_OPS or "convolution" in name or "attention" in name else "compute"


def kernel_class(name: str, triton_names: AbstractSet[str]) -> str:
    if name in triton_names:
        return "triton"
    return "library" if LIBRARY_KERNEL.search(name) else "copy" if COPY_KERNEL.search(name) else "aten"
