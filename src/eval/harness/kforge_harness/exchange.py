"""Buffers the judge owns and lends to the worker: the kernel's inputs, its output slots and
the reference's parameters.

The judge allocates every buffer and writes what goes in; the worker attaches by a
descriptor (JSON). Nothing travels the other way but JSON, so the judge never loads an
object the worker made. Two transports:

- `cuda_ipc` (GPU): one `cuMemAlloc` per buffer through the driver API, so an IPC handle
  maps exactly that buffer, never a caching-allocator segment that also holds the judge's
  private tensors (the reference's outputs must stay out of reach).
- `file` (CPU interpreter, or GPU when IPC is refused): a file in the evaluation's exchange
  directory, mapped shared by both processes.
"""

import ctypes
import os

from .tensors import tree_map

DTYPES = ("float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8",
          "bool", "complex64", "complex128")


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def torch_dtype(name):
    import torch

    if name not in DTYPES:
        raise ValueError("unsupported dtype %r" % name)
    return getattr(torch, name)


# -- the CUDA driver API, the small part we need -----------------------------------------

_cuda = None
GRANULE = 2 << 20


class IpcHandle(ctypes.Structure):
    """CUipcMemHandle: 64 opaque bytes, passed by value (a bare ctypes array would be passed
    as a pointer)."""
    _fields_ = [("reserved", ctypes.c_char * 64)]


def _driver():
    global _cuda
    if _cuda is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(IpcHandle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), IpcHandle, ctypes.c_uint]
        _cuda = lib
    return _cuda


CUDA_ERROR_OUT_OF_MEMORY = 2


class DriverOutOfMemory(RuntimeError):
    """cuMemAlloc found no room: the judge turns it into an `oom` verdict."""


def _check(status, what):
    if status == CUDA_ERROR_OUT_OF_MEMORY:
        raise DriverOutOfMemory("%s: out of memory (CUDA_ERROR_OUT_OF_MEMORY)" % what)
    if status != 0:
        raise RuntimeError("%s failed with CUDA driver error %d" % (what, status))


class _CudaArray:
    """Presents raw device memory to torch.as_tensor (no copy, no ownership)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}


def _wrap_device(ptr, nbytes, dtype, shape, device):
    import torch

    raw = torch.as_tensor(_CudaArray(ptr, max(nbytes, 1)), device=device)[:nbytes]
    return raw.view(torch_dtype(dtype)).view(shape)


def _wrap_file(path, nbytes, dtype, shape):
    import torch

    raw = torch.from_file(path, shared=True, size=max(nbytes, 1), dtype=torch.uint8)[:nbytes]
    return raw.view(torch_dtype(dtype)).view(shape)


def _nbytes(shape, dtype):
    import torch

    n = 1
    for s in shape:
        n *= int(s)
    return n * torch.empty((), dtype=torch_dtype(dtype)).element_size()


class Lender:
    """The judge's side: allocates buffers, hands out descriptors, frees everything at close."""

    def __init__(self, transport, device, directory):
        self.transport = transport
        self.device = device
        self.directory = directory
        self.count = 0
        self.allocations = []

    def buffer(self, shape, dtype):
        """(tensor the judge uses, descriptor the worker attaches by)."""
        shape = [int(s) for s in shape]
        dtype = dtype_name(dtype)
        nbytes = _nbytes(shape, dtype)
        self.count += 1
        desc = {"buffer": self.count, "transport": self.transport, "shape": shape, "dtype": dtype,
                "nbytes": nbytes}
        if self.transport == "cuda_ipc":
            lib = _driver()
            ptr = ctypes.c_uint64()
            # Whole 2 MiB granules: the driver packs small allocations into shared pages, and
            # an IPC handle must never map a neighbour's memory.
            _check(lib.cuMemAlloc_v2(ctypes.byref(ptr), -(-max(nbytes, 1) // GRANULE) * GRANULE), "cuMemAlloc")
            self.allocations.append(ptr.value)
            handle = IpcHandle()
            _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), ptr.value), "cuIpcGetMemHandle")
            desc["handle"] = bytes(handle).hex()
            tensor = _wrap_device(ptr.value, nbytes, dtype, shape, self.device)
        else:
            path = os.path.join(self.directory, "buffer-%d.bin" % self.count)
            with open(path, "wb") as f:
                f.truncate(max(nbytes, 1))
            desc["path"] = path
            tensor = _wrap_file(path, nbytes, dtype, shape)
        return tensor, desc

    def like(self, value):
        """Buffers shaped like every tensor of a tree: (tree of tensors, tree of descriptors)."""
        import torch

        tensors = {}

        def make(v):
            if isinstance(v, torch.Tensor):
                t, d = self.buffer(v.shape, v.dtype)
                tensors[d["buffer"]] = t
                return d
            return {"value": v}

        descriptors = tree_map(make, value)
        return tree_map(lambda d: tensors[d["buffer"]] if "buffer" in d else d["value"], descriptors,
                        leaf=lambda d: isinstance(d, dict) and ("buffer" in d or "value" in d)), descriptors

    def close(self):
        if self.allocations:
            import torch

            torch.cuda.synchronize()
            lib = _driver()
            for ptr in self.allocations:
                lib.cuMemFree_v2(ptr)
            self.allocations = []


class Borrower:
    """The worker's side: attaches the judge's buffers by descriptor."""

    def __init__(self, device):
        self.device = device

    def attach(self, desc):
        shape = [int(s) for s in desc["shape"]]
        dtype = desc["dtype"]
        nbytes = _nbytes(shape, dtype)
        if nbytes != desc["nbytes"]:
            raise ValueError("buffer %s: size does not match its shape" % desc.get("buffer"))
        if desc["transport"] == "cuda_ipc":
            lib = _driver()
            handle = IpcHandle.from_buffer_copy(bytes.fromhex(desc["handle"]))
            ptr = ctypes.c_uint64()
            _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")
            return _wrap_device(ptr.value, nbytes, dtype, shape, self.device)
        return _wrap_file(desc["path"], nbytes, dtype, shape)

    def attach_tree(self, descriptors):
        return tree_map(lambda d: self.attach(d) if "buffer" in d else d["value"], descriptors,
                        leaf=lambda d: isinstance(d, dict) and ("buffer" in d or "value" in d))
