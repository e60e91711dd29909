"""Buffers the judge owns and lends to the worker: the kernel's inputs, its output slots and
the reference's parameters.

The judge allocates every buffer and writes what goes in; the worker attaches by a
descriptor (JSON) and, for memory, a file descriptor passed over the channel. Nothing travels
the other way but JSON, so the judge never loads an object the worker made, and nothing is
ever reached through a path: a name in a directory the worker can write could be swapped for
a symlink to any file of the judge's (it was, in round 2 of the red team). Two transports:

- `cuda_ipc` (GPU): one `cuMemAlloc` per buffer through the driver API, so an IPC handle
  maps exactly that buffer, never a caching-allocator segment that also holds the judge's
  private tensors (the reference's outputs must stay out of reach).
- `memfd` (CPU interpreter): one anonymous memory file per lend (memfd_create), mapped
  shared by both processes, each buffer at a 64-byte aligned offset in it; its descriptor
  goes to the worker with the message that lends it (SCM_RIGHTS).
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


def cuda_driver():
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


ALIGN = 64  # bytes between buffers of one memory file: any dtype's alignment


def _map(fd, size):
    """The whole memory file as a writable shared mapping."""
    import mmap

    return mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)


def _wrap_mapping(mapping, offset, nbytes, dtype, shape):
    import torch

    raw = torch.frombuffer(mapping, dtype=torch.uint8, count=max(nbytes, 1), offset=offset)[:nbytes]
    return raw.view(torch_dtype(dtype)).view(shape)


def _nbytes(shape, dtype):
    import torch

    n = 1
    for s in shape:
        n *= int(s)
    return n * torch.empty((), dtype=torch_dtype(dtype)).element_size()


class Lender:
    """The judge's side: allocates buffers, hands out descriptors, frees everything at close."""

    def __init__(self, transport, device):
        if transport not in ("cuda_ipc", "memfd"):
            raise ValueError("unknown transport %r" % transport)
        self.transport = transport
        self.device = device
        self.count = 0
        self.allocations = []
        self.mappings = []

    def lend(self, shapes):
        """Buffers shaped like [(shape, dtype)]: (tensors the judge uses, descriptors the worker
        attaches by, file descriptors to send with them). The caller closes the file
        descriptors once sent; the judge keeps its mapping until close()."""
        specs = [([int(s) for s in shape], dtype_name(dtype)) for shape, dtype in shapes]
        sizes = [_nbytes(shape, dtype) for shape, dtype in specs]
        tensors, descriptors, fds = [], [], []
        if self.transport == "memfd" and specs:
            offsets, size = [], 0
            for nbytes in sizes:
                offsets.append(size)
                size += -(-max(nbytes, 1) // ALIGN) * ALIGN
            fd = os.memfd_create("kforge-lent", os.MFD_CLOEXEC)
            os.ftruncate(fd, max(size, 1))
            mapping = _map(fd, size)
            self.mappings.append(mapping)
            fds.append(fd)
        for i, ((shape, dtype), nbytes) in enumerate(zip(specs, sizes)):
            self.count += 1
            desc = {"buffer": self.count, "transport": self.transport, "shape": shape, "dtype": dtype,
                    "nbytes": nbytes}
            if self.transport == "cuda_ipc":
                lib = cuda_driver()
                ptr = ctypes.c_uint64()
                # Whole 2 MiB granules: the driver packs small allocations into shared pages, and
                # an IPC handle must never map a neighbour's memory.
                _check(lib.cuMemAlloc_v2(ctypes.byref(ptr), -(-max(nbytes, 1) // GRANULE) * GRANULE), "cuMemAlloc")
                self.allocations.append(ptr.value)
                handle = IpcHandle()
                _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), ptr.value), "cuIpcGetMemHandle")
                desc["handle"] = bytes(handle).hex()
                tensors.append(_wrap_device(ptr.value, nbytes, dtype, shape, self.device))
            else:
                desc.update(fd=0, offset=offsets[i])
                tensors.append(_wrap_mapping(mapping, offsets[i], nbytes, dtype, shape))
            descriptors.append(desc)
        return tensors, descriptors, fds

    def like(self, value):
        """Buffers shaped like every tensor of a tree, in one lend: (tree of tensors, tree of
        descriptors, file descriptors)."""
        import torch

        leaves = []

        def collect(v):
            if isinstance(v, torch.Tensor):
                leaves.append((v.shape, v.dtype))
                return {"leaf": len(leaves) - 1}
            return {"value": v}

        marked = tree_map(collect, value)
        tensors, descriptors, fds = self.lend(leaves)
        is_mark = lambda d: isinstance(d, dict) and ("leaf" in d or "value" in d)  # noqa: E731
        return (tree_map(lambda d: tensors[d["leaf"]] if "leaf" in d else d["value"], marked, leaf=is_mark),
                tree_map(lambda d: descriptors[d["leaf"]] if "leaf" in d else d, marked, leaf=is_mark), fds)

    def close(self):
        if self.allocations:
            import torch

            torch.cuda.synchronize()
            lib = cuda_driver()
            for ptr in self.allocations:
                lib.cuMemFree_v2(ptr)
            self.allocations = []
        self.mappings = []  # unmapped when the last tensor over them goes


class Borrower:
    """The worker's side: attaches the judge's buffers by descriptor."""

    def __init__(self, device):
        self.device = device
        self.mappings = []

    def attach(self, desc, mappings=()):
        shape = [int(s) for s in desc["shape"]]
        dtype = desc["dtype"]
        nbytes = _nbytes(shape, dtype)
        if nbytes != desc["nbytes"]:
            raise ValueError("buffer %s: size does not match its shape" % desc.get("buffer"))
        if desc["transport"] == "cuda_ipc":
            lib = cuda_driver()
            handle = IpcHandle.from_buffer_copy(bytes.fromhex(desc["handle"]))
            ptr = ctypes.c_uint64()
            _check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")
            return _wrap_device(ptr.value, nbytes, dtype, shape, self.device)
        if desc["transport"] != "memfd":
            raise ValueError("buffer %s: unknown transport %r" % (desc.get("buffer"), desc["transport"]))
        mapping = mappings[int(desc["fd"])]
        offset = int(desc["offset"])
        if offset < 0 or offset + nbytes > len(mapping):
            raise ValueError("buffer %s lies outside its memory file" % desc.get("buffer"))
        return _wrap_mapping(mapping, offset, nbytes, dtype, shape)

    def map_fds(self, fds):
        """Maps each file descriptor of a lend (and closes it): the mappings attach() takes."""
        mappings = []
        for fd in fds:
            try:
                mappings.append(_map(fd, os.fstat(fd).st_size))
            finally:
                os.close(fd)
        self.mappings.extend(mappings)
        return mappings

    def attach_tree(self, descriptors, mappings=()):
        return tree_map(lambda d: self.attach(d, mappings) if "buffer" in d else d["value"], descriptors,
                        leaf=lambda d: isinstance(d, dict) and ("buffer" in d or "value" in d))
