"""Can the judge lend GPU memory to the worker now that each runs in a sandbox of its own?

The judge lends the kernel's buffers by legacy CUDA IPC (exchange.py: cuMemAlloc,
cuIpcGetMemHandle; the worker cuIpcOpenMemHandle). Before issue 34 the judge ran on the host
and the worker in the kernels' sandbox (its own PID, IPC, mount namespaces and, as root, its
own uid); now the judge runs in the tasks' sandbox, a sibling of the kernels'. Legacy CUDA
IPC handles are reported not to open across PID namespaces in some setups (UCX, NCCL
containers), so this probe opens a handle in each arrangement, with the harness's own
sandboxes (kforge_harness.sandbox, the policies the server gives the two zygotes):

  host -> host                          (no sandbox: the baseline)
  host -> kernels' sandbox              (the arrangement before issue 34)
  tasks' sandbox -> kernels' sandbox    (the arrangement now)

Each line says whether the importer read back the value the exporter wrote. The sandboxes'
processes are forked, as the judge and the worker are, so they have small pid numbers in
their own namespaces, and the two sandboxes' numbers can coincide (the first judge and the
first worker are both pid 2): the last arrangement is tried with different and with equal
pid numbers, since the driver is said to check the exporter's pid. Only the last two lines
matter for kforge now; the first two say whether a failure is the sandboxes' or the
machine's. Run from the repository root with the Python kforge uses:

  $KFORGE_PYTHON scripts/gpu/ipc_between_sandboxes.py

Exit 0 when the last arrangement works, 1 when it does not, 2 when there is no CUDA.
"""

import os
import subprocess
import sys

HARNESS = os.path.join(os.getcwd(), "src", "eval", "harness")
sys.path.insert(0, HARNESS)

from kforge_harness import sandbox  # noqa: E402

# Runs in each process (`python -c PROBE export` / `python -c PROBE import HANDLE`): the
# driver API through ctypes, no torch, so that a process starts in well under a second.
PROBE = r'''
import ctypes, os, sys
# Fork sys.argv[1] short-lived children first, then do the work in a child: in a fresh pid
# namespace the work then runs as pid 2 + argv[1].
for _ in range(int(sys.argv.pop(1))):
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
child = os.fork()
if child:
    status = os.waitpid(child, 0)[1]
    sys.exit(os.waitstatus_to_exitcode(status) if status else 0)
VALUE = 0x6B666F72
def check(status, what):
    if status:
        print("ERROR %s: CUDA driver error %d" % (what, status), flush=True)
        sys.exit(1)
try:
    lib = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("NOCUDA %s" % e, flush=True)
    sys.exit(2)
lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
lib.cuMemsetD32_v2.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t]
lib.cuMemcpyDtoH_v2.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t]
lib.cuIpcGetMemHandle.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]
lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), Handle, ctypes.c_uint]
check(lib.cuInit(0), "cuInit")
device, context = ctypes.c_int(), ctypes.c_void_p()
check(lib.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
check(lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
if sys.argv[1] == "export":
    ptr = ctypes.c_uint64()
    check(lib.cuMemAlloc_v2(ctypes.byref(ptr), 2 << 20), "cuMemAlloc")
    check(lib.cuMemsetD32_v2(ptr.value, VALUE, (2 << 20) // 4), "cuMemsetD32")
    check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
    handle = ctypes.create_string_buffer(64)
    check(lib.cuIpcGetMemHandle(handle, ptr.value), "cuIpcGetMemHandle")
    print("HANDLE %s %d" % (handle.raw.hex(), os.getpid()), flush=True)
    sys.stdin.readline()  # the memory must outlive the importer's use of it
else:
    handle = Handle.from_buffer_copy(bytes.fromhex(sys.argv[2]))
    ptr = ctypes.c_uint64()
    check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, 1), "cuIpcOpenMemHandle")
    word = ctypes.c_uint32()
    check(lib.cuMemcpyDtoH_v2(ctypes.byref(word), ptr.value, 4), "cuMemcpyDtoH")
    lib.cuIpcCloseMemHandle(ptr.value)
    print("READ %s" % ("ok" if word.value == VALUE else "wrong value 0x%x" % word.value), flush=True)
    print("PID %d" % os.getpid(), flush=True)
'''


def command(role):
    """(argv, env) running the probe on the host (role None) or in the role's sandbox."""
    argv = [sys.executable, "-c", PROBE]
    if role is None:
        return argv, dict(os.environ)
    info = sandbox.detect()
    policy = sandbox.default_policy(harness_dir=HARNESS, hidden_paths=[], interpret=False,
                                    device_env=dict(os.environ), role=role)
    return sandbox.launch_argv(info, policy, argv), policy.env


def arrangement(exporter_role, importer_role, exporter_burn=0, importer_burn=0):
    """What the importer read ("READ ok") and each side's pid in its namespace, or why not."""
    argv, env = command(exporter_role)
    exporter = subprocess.Popen(argv + [str(exporter_burn), "export"], env=env, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = exporter.stdout.readline().strip()
        if not line.startswith("HANDLE "):
            exporter.kill()
            return "exporter: " + (line or exporter.stderr.read().strip()[-300:] or "no answer")
        _, handle, exporter_pid = line.split()
        argv, env = command(importer_role)
        importer = subprocess.run(argv + [str(importer_burn), "import", handle], env=env, capture_output=True,
                                  text=True, timeout=120)
        lines = importer.stdout.strip().splitlines()
        read = next((x for x in lines if not x.startswith("PID ")), None)
        pid = next((x.split()[1] for x in lines if x.startswith("PID ")), "?")
        return "%s (pids: exporter %s, importer %s)" % (
            read or "importer: " + (importer.stderr.strip()[-300:] or "no answer"), exporter_pid, pid)
    finally:
        try:
            exporter.communicate("done\n", timeout=30)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            exporter.kill()


def main():
    info = sandbox.detect()
    print("sandbox: %s (%s)" % (info.kind, info.detail or info.reason))
    if info.kind == "none":
        print("no sandbox here: nothing to compare")
        return 2
    works = True
    for name, exporter, importer, burns, counts in (
            ("host -> host", None, None, (0, 0), False),
            ("host -> kernels' sandbox (before)", None, "kernel", (0, 0), False),
            ("tasks' -> kernels' sandbox, other pids (now)", "task", "kernel", (1, 0), True),
            ("tasks' -> kernels' sandbox, equal pids (now)", "task", "kernel", (0, 0), True)):
        outcome = arrangement(exporter, importer, *burns)
        print("%-46s %s" % (name, outcome))
        if "NOCUDA" in outcome:
            return 2
        if counts:
            works = works and outcome.startswith("READ ok")
    return 0 if works else 1


if __name__ == "__main__":
    sys.exit(main())
