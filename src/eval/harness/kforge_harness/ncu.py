"""Nsight Compute: presence, permission and one profiled forward of ModelNew."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Union

from . import sandbox
from .errors import clean_text, first_line
from .loading import load_module, load_task, seed_everything
from .tensors import to_device


NCU_METRICS = [
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_dynamic",
    "launch__shared_mem_per_block_static",
    "launch__grid_size",
    "launch__block_size",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
]
NCU_PERMISSION_FIX = ("GPU performance counters are not permitted for this user: run as root, or load the "
                      "driver with NVreg_RestrictProfilingToAdminUsers=0 (see NVIDIA's ERR_NVGPUCTRPERM page)")


def find_ncu() -> Optional[str]:
    explicit = os.environ.get("KFORGE_NCU")
    if explicit:
        return explicit if os.path.exists(explicit) else None
    found = shutil.which("ncu")
    if found:
        return found
    for base in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute"):
        if os.path.isfile(base):
            return base
        if os.path.isdir(base):
            for root, _, files in os.walk(base):
                if "ncu" in files:
                    return os.path.join(root, "ncu")
    return None


def ncu_check() -> Dict[str, Any]:
    ncu = find_ncu()
    if not ncu:
        return {"found": False, "message": "ncu (Nsight Compute) not found on PATH; install Nsight Compute or set KFORGE_NCU"}
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
        version = (out.stdout.strip().splitlines() or ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"found": True, "path": ncu, "message": "ncu --version failed: %s" % e}
    probe = ("import torch; x = torch.ones(1024, device='cuda'); torch.cuda.synchronize(); "
             "y = x * 2; torch.cuda.synchronize()")
    try:
        run = subprocess.run([ncu, "--metrics", "gpu__time_duration.sum", "--launch-count", "1",
                              sys.executable, "-c", probe], capture_output=True, text=True, timeout=180)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"found": True, "path": ncu, "version": version, "permitted": None,
                "message": "the permission probe did not finish: %s" % e}
    text = run.stdout + run.stderr
    if "ERR_NVGPUCTRPERM" in text:
        return {"found": True, "path": ncu, "version": version, "permitted": False, "message": NCU_PERMISSION_FIX}
    permitted = "gpu__time_duration.sum" in text
    return {"found": True, "path": ncu, "version": version, "permitted": permitted,
            "message": "" if permitted else "ncu ran but reported no metric: " + first_line(clean_text(text, 5))}


def run_ncu(job: Mapping[str, Any], info: sandbox.SandboxInfo, policy: sandbox.Policy,
            private_root: str) -> Dict[str, Any]:
    """Profiles one forward of ModelNew in a fresh process under ncu, inside the same kind of
    sandbox as every worker (the profiled process runs the kernel's code). It is not part of
    any verdict, so the task module may live in it. Its files come from a directory of the
    server's, read-only in there; ncu's report comes back through a memory file passed as a
    descriptor, never a path the sandbox could swap for a link. Run by root it keeps the
    user namespace (uid 0 without capabilities), which GPU performance counters need."""
    ncu = find_ncu()
    if not ncu:
        return {"available": False, "reason": "ncu (Nsight Compute) not found on PATH; install it or set KFORGE_NCU"}
    inputs = tempfile.mkdtemp(prefix="ncu-", dir=private_root)
    report_fd = os.memfd_create("kforge-ncu-report", 0)  # inherited by ncu on purpose
    try:
        kernel_file = os.path.join(inputs, "kernel.py")
        task_file = os.path.join(inputs, "task.py")
        for path, text in ((kernel_file, job["kernel_source"]), (task_file, job["task_source"])):
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        job_path = os.path.join(inputs, "profile.json")
        with open(job_path, "w") as f:
            json.dump({"task_file": task_file, "kernel_file": kernel_file, "seed": job["seed"],
                       "device": job["device"]}, f)
        policy = dataclasses.replace(policy, readonly_paths=policy.readonly_paths + [inputs], uid=None, gid=None)
        command = sandbox.launch_argv(info, policy, [
            ncu, "--csv", "--page", "raw", "--profile-from-start", "off", "--target-processes", "all",
            "--metrics", ",".join(NCU_METRICS), "--log-file", "/proc/self/fd/%d" % report_fd,
            sys.executable, "-m", "kforge_harness", "profile", job_path])
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=float(job.get("profile_timeout_s", 300)),
                                 env=policy.env, start_new_session=True, pass_fds=(report_fd,))
        except subprocess.TimeoutExpired:
            return {"available": False, "reason": "Nsight Compute did not finish in time"}
        text = _read_fd(report_fd)
        if "ERR_NVGPUCTRPERM" in text + run.stdout + run.stderr:
            return {"available": False, "reason": NCU_PERMISSION_FIX}
        kernels = parse_ncu_csv(text)
        if not kernels:
            return {"available": False, "reason": "Nsight Compute reported no kernel: " +
                    first_line(clean_text(text + run.stderr, 10))}
        return {"available": True, "tool": "ncu", "kernels": kernels}
    finally:
        os.close(report_fd)
        shutil.rmtree(inputs, ignore_errors=True)


def parse_ncu_csv(text: str) -> List[Dict[str, Any]]:
    import csv
    import io

    lines = [l for l in text.splitlines() if l.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    kernels: List[Dict[str, Any]] = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue
        record = dict(zip(header, row))
        if record.get("ID", "").strip() == "" or not record.get("ID", "0").strip().isdigit():
            continue  # the units row
        metrics: Dict[str, Union[float, str]] = {}
        for name in NCU_METRICS:
            raw = record.get(name, "").replace(",", "")
            try:
                metrics[name] = float(raw)
            except ValueError:
                if raw:
                    metrics[name] = raw
        kernels.append({"name": record.get("Kernel Name", "?"), "metrics": metrics})
    return kernels


def profile_main(job_path: str) -> None:
    """One warmed-up forward of ModelNew between cudaProfilerStart/Stop."""
    import torch

    with open(job_path) as f:
        job = json.load(f)
    task = load_task(job["task_file"])
    kernel = load_module(job["kernel_file"], "kforge_kernel")
    device = job["device"]
    seed_everything(job["seed"])
    init = task.get_init_inputs() if hasattr(task, "get_init_inputs") else []
    model = kernel.ModelNew(*init).to(device)
    seed_everything(job["seed"] + 2000)
    inputs = to_device(list(task.get_inputs()), device)
    with torch.no_grad():
        for _ in range(2):
            model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()  # type: ignore[no-untyped-call]
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()  # type: ignore[no-untyped-call]


def _read_fd(fd: int, limit: int = 1 << 20) -> str:
    """The last `limit` bytes of a memory file, by its descriptor."""
    size = os.fstat(fd).st_size
    return os.pread(fd, limit, max(0, size - limit)).decode("utf-8", errors="replace")
