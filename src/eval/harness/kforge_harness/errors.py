"""Error text for people and repair prompts, and the classification of exceptions raised by
candidate code into failure categories."""

from __future__ import annotations

import os
import re
import traceback
from typing import Optional, Sequence, TypedDict

from .protocol import LOG_LIMIT, MESSAGE_LINES, KernelFailure


class KernelContext(TypedDict):
    """What `classify` knows about the kernel it classifies a failure of (the worker's)."""

    interpret: bool  # Triton's interpreter: a jit body runs as Python
    kernel_file: Optional[str]  # the kernel's file, once it is being imported
    jit_kernels: list[str]  # the @triton.jit functions the static check found


INVOKED_WITH = re.compile(r"Invoked with:.*", re.S)
TENSOR_DUMP = re.compile(r"tensor\(\[.*?\]\)?(, device='[^']*')?(, dtype=[\w.]+)?\)?", re.S)


def clean_text(text: str, max_lines: int = MESSAGE_LINES) -> str:
    """The tail of an error text without pybind argument dumps or tensor reprs."""
    cleaned = []
    skipping = False
    for line in text.splitlines():
        if "Invoked with:" in line:
            cleaned.append(line.split("Invoked with:")[0] + "Invoked with: <arguments elided>")
            skipping = True
            continue
        if skipping:
            if line.strip() == "" or line.startswith(("Traceback", "The above", "During handling")):
                skipping = False
            else:
                continue
        cleaned.append(line)
    joined = TENSOR_DUMP.sub("tensor(...)", "\n".join(cleaned))
    lines = joined.splitlines()
    if len(lines) > max_lines:
        lines = ["... (%d earlier lines omitted)" % (len(lines) - max_lines)] + lines[-max_lines:]
    return "\n".join(lines)


def evaluation_log(timeline: Sequence[tuple[float, str]], output: str) -> str:
    """The result's log: when each phase began (seconds from the judge's start), then what
    the judge and the kernel's process printed. Never empty: a quiet, correct kernel still
    shows what the evaluation went through."""
    lines = ["phases (seconds from the start of the judge):"]
    lines += ["%8.2f  %s" % (t, phase) for t, phase in timeline] or ["    (none reported)"]
    lines.append("")
    lines.append("output of the judge and the kernel's process:")
    lines.append(output.rstrip("\n") if output.strip() else "(nothing printed)")
    return "\n".join(lines) + "\n"


def tail_bytes(text: str, limit: int = LOG_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return "... (%d earlier characters omitted)\n" % (len(text) - limit) + text[-limit:]


CUDA_ERROR_PATTERNS = (
    "CUDA error", "illegal memory access", "device-side assert", "illegal instruction",
    "misaligned address", "unspecified launch failure", "cudaError", "CUDA driver error",
    "an illegal", "CUBLAS_STATUS", "CUDNN_STATUS", "hipError",
)
OOM_PATTERNS = ("out of memory", "can't allocate memory", "CUDA_ERROR_OUT_OF_MEMORY", "Tried to allocate")
COMPILE_TYPES = {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct", "MLIRCompilationError"}
INTERPRETED_COMPILE_TYPES = (AttributeError, NameError, TypeError, ValueError, AssertionError, NotImplementedError, ImportError)


def exception_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def first_line(text: str, limit: int = 300) -> str:
    line = next((l for l in text.strip().splitlines() if l.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def classify(exc: BaseException, stage: str, ctx: KernelContext) -> KernelFailure:
    """Maps an exception from candidate code to a KernelFailure."""
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = exception_text(exc)
    message = clean_text(text)
    names = [type(x).__name__ for x in chain]
    joined = "\n".join("%s: %s" % (type(x).__name__, x) for x in chain)
    summary = "%s: %s" % (type(exc).__name__, first_line(str(exc)) or "(no message)")

    if isinstance(exc, SyntaxError):
        return KernelFailure("syntax", summary, message, {"line": exc.lineno, "col": exc.offset})
    for x in chain:
        if type(x).__name__ == "OutOfResources":
            details: dict[str, object] = {
                "resource": getattr(x, "name", None),
                "required": getattr(x, "required", None),
                "limit": getattr(x, "limit", None),
            }
            m = re.search(r"out of resource: (\w[\w ]*?), Required: (\d+), Hardware limit: (\d+)", str(x))
            if m:
                details = {"resource": m.group(1), "required": int(m.group(2)), "limit": int(m.group(3))}
            summary = "out of resources: %s requires %s, the limit is %s" % (
                details["resource"], details["required"], details["limit"])
            return KernelFailure("out_of_resources", summary, message, details)
    for x in chain:
        if type(x).__name__ in COMPILE_TYPES:
            details = {}
            m = re.search(r"at (\d+):(\d+):", str(x))
            if m:
                details = {"kernel_line": int(m.group(1)), "col": int(m.group(2))}
            location = kernel_frame(x, ctx)
            if location:
                details.update(location)
            where = " (%s line %s)" % (details.get("function", "kernel"), details["line"]) if "line" in details else ""
            return KernelFailure("compile", "Triton compile error%s: %s" % (where, compile_reason(x)), message, details)
    if any("OutOfMemoryError" == n for n in names) or any(p in joined for p in OOM_PATTERNS):
        m = re.search(r"Tried to allocate ([\d.]+ \w+)|allocate (\d+) bytes", joined)
        details = {"requested": (m.group(1) or m.group(2) + " bytes")} if m else {}
        return KernelFailure("oom", summary, message, details)
    if any(n in ("AcceleratorError", "CudaError") for n in names) or any(p in joined for p in CUDA_ERROR_PATTERNS):
        return KernelFailure("cuda_error", summary, message)
    if ctx.get("interpret"):
        # Under the interpreter a jit body runs as Python: what fails to compile on a GPU
        # raises from inside the kernel's own frame (wrapped in an InterpreterError).
        for x in chain:
            location = kernel_frame(x, ctx) if isinstance(x, INTERPRETED_COMPILE_TYPES) else None
            if location:
                summary = "Triton compile error (%s line %s, interpreter): %s: %s" % (
                    location["function"], location["line"], type(x).__name__, first_line(str(x)))
                return KernelFailure("compile", summary, message, location)
    if stage == "import":
        return KernelFailure("import", summary, message)
    return KernelFailure("runtime", summary, message)


def compile_reason(exc: BaseException) -> str:
    lines = [l for l in str(exc).strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else type(exc).__name__


def kernel_frame(exc: BaseException, ctx: KernelContext) -> dict[str, object] | None:
    """The innermost traceback frame inside a @triton.jit function of the kernel file."""
    kernel_file = ctx.get("kernel_file")
    jit = set(ctx.get("jit_kernels") or ())
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        code = frame.f_code
        if kernel_file and os.path.abspath(code.co_filename) == kernel_file and code.co_name in jit:
            found = {"file": "kernel.py", "line": lineno, "function": code.co_name}
    return found
