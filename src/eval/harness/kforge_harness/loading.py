"""Loading the task (the judge and its timing processes only, in the tasks' sandbox) and the
kernel (worker only), seeding, and drawing inputs."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, List, MutableMapping, Optional, Sequence, Tuple

if TYPE_CHECKING:
    import random

    import torch

from .errors import first_line
from .protocol import TaskFailure
from .tensors import to_device, tree_map, tree_map_pairs


def load_module(path: str, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path  # a .py file has both
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # triton and dataclasses look modules up by name
    spec.loader.exec_module(module)
    return module


def load_task(path: str) -> ModuleType:
    try:
        module = load_module(path, "kforge_task")
    except SyntaxError as e:
        raise TaskFailure("the task file has a syntax error at line %s: %s" % (e.lineno, e.msg))
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: BLE001 -- any failure of the task's import is reported
        raise TaskFailure("importing the task file raised %s: %s" % (type(e).__name__, first_line(str(e))))
    import torch

    missing: List[str] = []
    model = getattr(module, "Model", None)
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        missing.append("a `class Model(nn.Module)`")
    if not callable(getattr(module, "get_inputs", None)):
        missing.append("a `get_inputs()` function")
    if missing:
        raise TaskFailure("the task file does not define %s (KernelBench format)" % " and ".join(missing))
    return module


def seed_everything(seed: int) -> None:
    """Python's, torch's (the CPU's and every CUDA device's generator) and numpy's generators
    seeded. Once CUDA is up, torch's generators are seeded directly: torch.manual_seed also
    seeds XPU and MTIA, whose seeding in a process that never used them formats a stack trace
    each call (~0.2 ms; a timing phase draws inputs for every timed forward)."""
    import random

    import torch

    random.seed(seed)
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        torch.cuda.manual_seed_all(seed)
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed % (2 ** 32))
    except ImportError:
        pass


def task_init_inputs(task: Any, result: MutableMapping[str, Any]) -> List[Any]:
    """Constructor arguments from the task (none when it has no get_init_inputs)."""
    if not hasattr(task, "get_init_inputs"):
        result["notes"].append("the task has no get_init_inputs(); constructors get no arguments")
        return []
    try:
        return list(task.get_init_inputs())
    except Exception as e:  # noqa: BLE001
        raise TaskFailure("the task's get_init_inputs() raised %s: %s" % (type(e).__name__, first_line(str(e))))


def build_reference(task: Any, init_inputs: Sequence[Any], seed: int,
                    device: str | torch.device) -> torch.nn.Module:
    from .memory import is_out_of_memory

    try:
        seed_everything(seed)
        model: torch.nn.Module = task.Model(*init_inputs).to(device)
        return model
    except Exception as e:  # noqa: BLE001
        if is_out_of_memory(e):
            raise
        raise TaskFailure("building the reference Model raised %s: %s" % (type(e).__name__, first_line(str(e))))


class InputSource:
    """Draws the task's inputs under a seed. On a GPU, `get_inputs()` runs with PyTorch's
    factory functions directed to the device (drawing 1.6G values on the host took 13 s,
    on the device 0.01 s); a task that cannot (numpy, explicit CPU tensors) is drawn on the
    host and copied once. `where` says which, for the result; `draw_ms` is the time of the
    latest draw. A draw that runs out of device memory is not retried on the host: the
    judge turns it into an `oom` verdict."""

    def __init__(self, task: Any, device: str, draw_limit_s: Optional[float] = None) -> None:
        self.task = task
        self.device = device
        self.draw_limit_s = draw_limit_s
        self.where: Optional[str] = None
        self.draw_ms: Optional[float] = None

    def draw(self, seed: int) -> Any:
        import time

        from .device import sync

        started = time.perf_counter()
        values = self._draw(seed)
        sync(self.device)
        draw_ms = self.draw_ms = (time.perf_counter() - started) * 1e3
        if self.draw_limit_s and draw_ms > self.draw_limit_s * 1e3:
            raise TaskFailure(
                "the task's get_inputs() took %.1f s for one call (limit %g s, [eval] input_draw_limit_s); an "
                "evaluation draws inputs about a dozen times: build them with torch factory functions "
                "(torch.rand, torch.randn, torch.randint), which kforge directs to the GPU"
                % (draw_ms / 1e3, self.draw_limit_s))
        return values

    def _draw(self, seed: int) -> Any:
        import torch

        from .memory import is_out_of_memory

        seed_everything(seed)
        if self.device != "cpu" and self.where != "host":
            try:
                with torch.device(self.device):
                    values = list(self.task.get_inputs())
                self.where = "device"
                return to_device(values, self.device)  # tensors a task built explicitly on the host
            except Exception as e:  # noqa: BLE001 -- retried on the host, where a real error repeats
                if is_out_of_memory(e):
                    raise
                self.where = "host"
                seed_everything(seed)
        try:
            values = list(self.task.get_inputs())
        except Exception as e:  # noqa: BLE001
            if is_out_of_memory(e):
                raise
            raise TaskFailure("the task's get_inputs() raised %s: %s" % (type(e).__name__, first_line(str(e))))
        self.where = self.where or ("host" if self.device != "cpu" else "cpu")
        return to_device(values, self.device)

    def meta_sizes(self, init_inputs: Sequence[Any], free_bytes: int) -> Tuple[Optional[int], Optional[int]]:
        """(bytes of one draw, bytes of the reference's outputs), found without allocating
        either: the task's factories and a second Model run on PyTorch's meta device. Either
        is None where the task cannot run that way (numpy inputs, ops without meta kernels,
        data-dependent shapes): the real draw and forward measure it then. The forward is
        only run for inputs over a tenth of the free memory: its first call imports torch's
        meta kernels (about 1 s), and smaller tasks are measured soon enough for real."""
        import torch

        from .memory import tensor_bytes

        try:
            with torch.device("meta"):
                inputs = list(self.task.get_inputs())
        except Exception:  # noqa: BLE001 -- numpy, explicit devices
            return None, None
        if tensor_bytes(inputs) * 10 < free_bytes:
            return tensor_bytes(inputs), None
        try:
            with torch.device("meta"), torch.no_grad():
                outputs = self.task.Model(*init_inputs)(*inputs)
            return tensor_bytes(inputs), tensor_bytes(outputs)
        except Exception:  # noqa: BLE001
            return tensor_bytes(inputs), None


def reference_forward(ref: Callable[..., Any], inputs: Sequence[Any], device: object) -> Any:
    import torch

    from .memory import is_out_of_memory

    try:
        with torch.no_grad():
            out = ref(*inputs)
        if device != "cpu":
            torch.cuda.synchronize()
        return out
    except Exception as e:  # noqa: BLE001
        if is_out_of_memory(e):
            raise
        raise TaskFailure("the reference Model failed on the task's inputs: %s: %s" % (
            type(e).__name__, first_line(str(e))))


def rotate_into(buffers: Any, values: Any, rng: random.Random) -> None:
    """Writes into same-shaped buffers the values of a tree, each tensor's flattened values
    rotated by a random offset of `rng` (the same values, every position moved: fresh inputs
    for a task whose draw is too slow to repeat per run)."""
    import torch

    def one(b: object, v: Any) -> None:
        if isinstance(b, torch.Tensor):
            n = b.numel()
            with torch.no_grad():
                if n <= 1:
                    b.copy_(v)
                    return
                r = rng.randrange(1, n)
                flat = v.reshape(-1)
                if b.is_contiguous():
                    dst = b.view(-1)
                    dst[: n - r].copy_(flat[r:])
                    dst[n - r:].copy_(flat[:r])
                else:
                    b.copy_(torch.cat([flat[r:], flat[:r]]).view(b.shape))

    tree_map_pairs(one, buffers, values)


def copy_into(buffers: Any, values: Any) -> Any:
    """Writes a tree of values into same-shaped lent buffers (tensors only)."""
    import torch

    def one(b: object, v: object) -> None:
        if isinstance(b, torch.Tensor):
            if not isinstance(v, torch.Tensor) or tuple(v.shape) != tuple(b.shape) or v.dtype != b.dtype:
                raise TaskFailure("get_inputs() returned inputs of a different shape or dtype from one call to "
                                  "the next; kforge needs the same shapes every call")
            with torch.no_grad():
                b.copy_(v)

    tree_map_pairs(one, buffers, values)
    return buffers


__all__ = ["load_module", "load_task", "seed_everything", "task_init_inputs", "build_reference",
           "InputSource", "reference_forward", "copy_into", "tree_map"]
