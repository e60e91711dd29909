"""Tests of kforge_harness/sandbox.py.

Pure tests: the environment allow-list, the policy, the mount plan, the launch commands.
Functional tests run small hostile scripts under each mechanism that works here (bwrap, and
the namespaces fallback, forced through probe()); a mechanism that does not work here is
skipped with the reason probe() gives. The sandbox is launched with this process's whole
environment (secret included), so it is the sandbox, not a careful caller, that drops it.
"""

from __future__ import annotations

from pathlib import Path
import importlib.util
import json
import os
import random
import socket
import subprocess
import sys
import textwrap
import time
from typing import Any, Sequence

import pytest

HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SANDBOX_PY = os.path.join(HARNESS, "kforge_harness", "sandbox.py")
# Loaded by path: the old single-file kforge_harness.py may sit next to the package dir, and
# a module file wins over a directory without __init__.py.
_spec = importlib.util.spec_from_file_location("kforge_sandbox_under_test", SANDBOX_PY)
assert _spec is not None and _spec.loader is not None
sandbox = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = sandbox
_spec.loader.exec_module(sandbox)

SECRET = "sk-proj-Zq8xW3vK9mPb2LtY7rNc4HdJ6fGs1QaE"
LOAD_SANDBOX = (
    "import importlib.util, sys\n"
    "spec = importlib.util.spec_from_file_location('sb', %r)\n"
    "sb = importlib.util.module_from_spec(spec); sys.modules['sb'] = sb; spec.loader.exec_module(sb)\n"
    % SANDBOX_PY)


# --- pure ------------------------------------------------------------------------------

def test_allowed_env_passes_only_allow_listed_names() -> None:
    source = {
        "OPENAI_API_KEY": "x", "ANTHROPIC_API_KEY": "y", "AWS_SECRET_ACCESS_KEY": "z",
        "GITHUB_TOKEN": "t", "KFORGE_CONFIG": "/c", "KFORGE_PROVIDER": "p", "LLM_ACCESS": "a",
        "XDG_CONFIG_HOME": "/root/.config", "HOME": "/root", "USER": "root", "SSH_AUTH_SOCK": "/s",
        "LD_PRELOAD": "/tmp/evil.so", "PYTHONPATH": "/evil", "PYTHONSTARTUP": "/evil.py",
        "TRITON_CACHE_MANAGER": "evil.Manager", "TRITON_KERNEL_OVERRIDE": "1",
        "TRITON_CACHE_DIR": "/elsewhere", "TRITON_INTERPRET": "0", "PATH": "/evil/bin:/usr/bin",
        "CUDA_VISIBLE_DEVICES": "0,1", "LANG": "C.UTF-8", "TRITON_DEBUG": "1", "PYTHONHASHSEED": "0",
    }
    env = sandbox.allowed_env(source, "/tmp", "/tmp", interpret=True, harness_dir="/h")
    ours = {"PATH", "HOME", "TMPDIR", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
            "PYTHONPATH", "TRITON_INTERPRET", "USER", "LOGNAME", "OMP_WAIT_POLICY"}
    assert set(env) == ours | {"CUDA_VISIBLE_DEVICES", "LANG", "TRITON_DEBUG", "PYTHONHASHSEED"}
    assert not [k for k in env if k.startswith("KFORGE_")]
    assert env["HOME"] == env["TMPDIR"] == "/tmp" and env["PYTHONPATH"] == "/h"
    assert env["TRITON_INTERPRET"] == "1"
    assert env["PATH"].split(":")[0] == os.path.dirname(sys.executable)
    assert "/evil/bin" not in env["PATH"]
    gpu = sandbox.allowed_env(source, "/tmp", "/tmp", interpret=False)
    assert "TRITON_INTERPRET" not in gpu and "PYTHONPATH" not in gpu


def test_on_the_cpu_torchs_threads_wait_passively_unless_the_user_says_otherwise() -> None:
    """On the CPU the judge and the worker take turns on the same cores: spinning OpenMP
    threads of the one waiting starve the one working (180 ms vs 9 ms a digest on a loaded
    2-core machine). On a GPU nothing is set; the user's own value passes either way."""
    assert sandbox.allowed_env({}, "/tmp", "/tmp", interpret=True)["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in sandbox.allowed_env({}, "/tmp", "/tmp", interpret=False)
    for interpret in (True, False):
        env = sandbox.allowed_env({"OMP_WAIT_POLICY": "ACTIVE"}, "/tmp", "/tmp", interpret=interpret)
        assert env["OMP_WAIT_POLICY"] == "ACTIVE"


def test_the_sandbox_names_its_user_without_a_passwd_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox's uid has no passwd entry; torch.compile asks getpass.getuser() for its
    cache paths (on an H200: `KeyError: getpwuid(): uid not found`), which reads USER and
    LOGNAME first. The host's user name is not passed."""
    import getpass

    env = sandbox.allowed_env({"USER": "alice", "LOGNAME": "alice"}, "/tmp", "/tmp", interpret=False)
    assert env["USER"] == env["LOGNAME"] == sandbox.SANDBOX_USER
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("USER", env["USER"])
    monkeypatch.setenv("LOGNAME", env["LOGNAME"])
    assert getpass.getuser() == sandbox.SANDBOX_USER


@pytest.mark.parametrize("value", [
    SECRET, "sk-ant-api03-abcdefghijklmnop", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AKIAIOSFODNN7EXAMPLE", "xoxb-1234-5678-abcdef", "hf_abcdefghijklmnopqrstuvwxyzABCD",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", "-----BEGIN OPENSSH PRIVATE KEY-----",
    "3f9a1c7be2d84f06a5c1e9b7d3f2a8c4e6b0d1f7",  # 40 hex chars: a classic API token
    "/usr/lib:Xk29fPq7LmZ3vB8nR4tY6wJ1sD5gH0cV2bN",  # random token hidden in a path list
])
def test_secret_looking_values_are_dropped(value: str) -> None:
    assert sandbox.looks_secret(value)
    for name in ("LANG", "TZ", "CUDA_HOME", "LD_LIBRARY_PATH", "TRITON_DEBUG"):
        assert name not in sandbox.allowed_env({name: value}, "/tmp", "/tmp", False)


@pytest.mark.parametrize("name,value", [
    ("NVIDIA_VISIBLE_DEVICES", "GPU-3b7e6c0a-5c5f-4c8e-9a1b-2d3e4f5a6b7c"),
    ("CUDA_VISIBLE_DEVICES", "MIG-GPU-3b7e6c0a-5c5f-4c8e-9a1b-2d3e4f5a6b7c,1"),
    ("LD_LIBRARY_PATH", "/usr/local/cuda-12.4/targets/x86_64-linux/lib:/opt/task-runner/lib64"),
    ("LANG", "en_US.UTF-8"), ("TZ", "America/Argentina/ComodRivadavia"),
    ("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
])
def test_ordinary_values_pass(name: str, value: str) -> None:
    assert sandbox.allowed_env({name: value}, "/tmp", "/tmp", False)[name] == value


def test_default_policy_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("LD_LIBRARY_PATH", "relative/lib:/nonexistent/lib:" + str(tmp_path / "lib"))
    (tmp_path / "lib").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python -m` puts the cwd (the sessions' dir)
    p = sandbox.default_policy(HARNESS, [str(tmp_path / "sessions")], True, dict(os.environ, KFORGE_X="1"))
    ro = set(p.readonly_paths)
    assert {sys.prefix, sys.base_prefix, HARNESS, "/usr", "/etc"} <= ro
    assert os.path.dirname(os.path.realpath(sys.executable)) in ro
    assert all(s in ro for s in sys.path if s and os.path.exists(s) and s != str(tmp_path))
    assert str(tmp_path) not in ro and str(home) not in ro and "/" not in ro
    assert str(tmp_path / "lib") in ro and not any("relative" in r or "nonexistent" in r for r in ro)
    assert p.writable_paths == []  # nothing of the host: the zygote's workers write to the private /tmp
    assert str(home) in p.hidden_paths and str(tmp_path / "sessions") in p.hidden_paths
    assert "/etc/shadow" in p.hidden_paths or not os.path.exists("/etc/shadow")
    assert "TRITON_CACHE_DIR" not in p.env and p.env["TRITON_INTERPRET"] == "1"  # each worker gets its own
    assert "KFORGE_X" not in p.env and p.workdir == "/tmp"
    assert p.devices == [] and p.limits["as"] and p.limits["core"] == 0
    # Run by root, the sandbox becomes an unprivileged host uid of its own; else no switch.
    assert (p.uid, p.gid) == ((sandbox.unprivileged_id(),) * 2 if os.geteuid() == 0 else (None, None))
    assert p.uid is None or (p.uid > 0 and p.uid != 65534)
    gpu = sandbox.default_policy(HARNESS, [], False, {})
    assert gpu.limits["as"] is None and "TRITON_INTERPRET" not in gpu.env  # CUDA needs the address space


def test_the_address_space_limit_stays_below_the_ram() -> None:
    for ram_gib in (4, 8, 16, 24, 64, 512):
        ram = ram_gib << 30
        assert sandbox.address_space_limit(ram) < ram
    assert sandbox.address_space_limit(24 << 30) == 16 << 30
    assert sandbox.address_space_limit(8 << 30) == 6 << 30


def test_the_host_tmp_is_never_exposed(tmp_path: Path) -> None:
    policy = sandbox.Policy(["/tmp", str(tmp_path)], [], [], {}, "/tmp", {}, True)
    plan = [(p, k) for p, k, _ in sandbox._plan(policy)]
    assert ("/tmp", "ro") not in plan and ("/tmp", "tmpfs") in plan  # a script run from /tmp puts it on sys.path
    assert (os.path.realpath(str(tmp_path)), "ro") in plan  # deeper paths are bound inside the private /tmp


def test_plan_orders_covers_and_reexposes(tmp_path: Path) -> None:
    a = tmp_path / "a"
    (a / "secret" / "pub").mkdir(parents=True)
    (a / "config.toml").write_text("k")
    (tmp_path / "elsewhere").mkdir()
    os.symlink(str(a), str(tmp_path / "link"))
    policy = sandbox.Policy(
        readonly_paths=[str(tmp_path / "link"), str(a / "secret" / "pub"), str(a / "x-missing"),
                        str(a / "secret")],
        writable_paths=[str(tmp_path / "w-missing")],
        hidden_paths=[str(a / "secret"), str(a / "config.toml"), str(tmp_path / "elsewhere")],
        env={}, workdir="/", limits={}, interpret=True)
    plan = [(p, k) for p, k, _ in sandbox._plan(policy)]
    assert plan.index((str(a), "ro")) < plan.index((str(a / "secret"), "hide")) \
        < plan.index((str(a / "secret" / "pub"), "ro"))
    assert (str(a / "config.toml"), "hidefile") in plan
    assert (str(a / "secret"), "ro") not in plan  # the same path hidden: hidden wins
    assert (str(tmp_path / "link"), "symlink") in plan  # the link given works in there
    assert not [p for p, _ in plan if "missing" in p or "elsewhere" in p]  # absent / not exposed
    assert plan[0] == ("/tmp", "tmpfs")
    with pytest.raises(ValueError):
        sandbox._plan(sandbox.Policy(["/"], [], [], {}, "/", {}, True))


def _policy(tmp_path: Path, interpret: bool = True) -> Any:
    project = tmp_path / "project"
    (project / "sessions").mkdir(parents=True)
    (project / "sessions" / "s1.json").write_text("SESSION-SECRET")
    (project / "config.toml").write_text("api_key = 'CONFIG-SECRET'")
    (project / "readme.txt").write_text("visible")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / ".netrc").write_text("HOME-SECRET")
    old_home = os.environ["HOME"]
    os.environ["HOME"] = str(home)  # default_policy hides the user's $HOME
    try:
        policy = sandbox.default_policy(
            HARNESS, [str(project / "sessions"), str(project / "config.toml")], interpret, dict(os.environ))
    finally:
        os.environ["HOME"] = old_home
    policy.readonly_paths.append(str(project))
    return policy


def test_launch_argv_bwrap_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", SECRET)
    policy = _policy(tmp_path)
    info = sandbox.SandboxInfo("bwrap", "", "", "/usr/bin/bwrap")
    argv = sandbox.launch_argv(info, policy, ["python", "-m", "kforge_harness", "zygote"])
    assert argv[:3] == ["/usr/bin/env", "-i", "/usr/bin/bwrap"]  # not even bwrap holds our env
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent", "--new-session", "--clearenv", "--disable-userns", "--as-pid-1"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and argv[argv.index("--uid") + 1] == "65534"
    setenv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "--setenv"}
    assert argv.index("--clearenv") < argv.index("--setenv")
    assert setenv == dict(policy.env, **{sandbox.OUTER_PIDNS_VAR: setenv[sandbox.OUTER_PIDNS_VAR]})
    assert not any(SECRET in a for a in argv)
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert ("--dev-bind", "/dev", "/dev") not in pairs and ("--dev", "/dev", "--size") in pairs
    assert argv.index("--proc") < pairs.index(("--ro-bind", "/proc/sys", "/proc/sys"))
    assert ("--tmpfs", "/dev/shm", "--ro-bind") in pairs
    sessions = str(tmp_path / "project" / "sessions")
    assert ("--tmpfs", sessions, ) in zip(argv, argv[1:]) and ("--remount-ro", sessions) in zip(argv, argv[1:])
    assert ("--ro-bind", "/dev/null", str(tmp_path / "project" / "config.toml")) in pairs
    assert "--bind" not in argv  # nothing of the host is writable
    assert argv[argv.index("--chdir") + 1] == "/tmp"
    tail = argv[argv.index("--chdir") + 3:]
    assert tail[:3] == [sys.executable, "-I", "-S"] and tail[4] == "sandbox-limits"
    assert json.loads(tail[5]) == policy.limits and tail[6:] == ["--", "python", "-m", "kforge_harness", "zygote"]


@pytest.mark.parametrize("uid", [None, 2130706433])
def test_launch_argv_namespaces_shape(tmp_path: Path, uid: int | None) -> None:
    import dataclasses

    policy = dataclasses.replace(_policy(tmp_path), uid=uid, gid=uid)
    info = sandbox.SandboxInfo("namespaces", "", "", "/usr/bin/unshare")
    argv = sandbox.launch_argv(info, policy, ["true"])
    split = argv.index("--")
    # Root (a uid to become) creates the namespaces itself: no user namespace maps it to root.
    user = ["--user", "--map-root-user"] if uid is None else []
    assert argv[:split] == ["/usr/bin/unshare"] + user + ["--pid", "--fork", "--kill-child", "--net", "--ipc",
                                                          "--uts", "--mount", "--mount-proc"]
    inner = argv[split + 1:]
    assert inner[4] == "sandbox-init" and inner[6:] == ["--", "true"]
    try:
        assert os.stat(inner[5]).st_mode & 0o077 == 0  # the policy file is private
        with open(inner[5]) as f:
            written = json.load(f)
    finally:
        os.unlink(inner[5])
    assert written["workdir"] == policy.workdir and written["hidden_paths"] == policy.hidden_paths
    assert written["uid"] == uid
    assert set(written["readonly_paths"]) >= set(policy.readonly_paths) | {sandbox.HERE}
    assert sandbox.OUTER_PIDNS_VAR in written["env"]


def test_launch_argv_none_is_unchanged() -> None:
    info = sandbox.SandboxInfo("none", "", "testing")
    assert sandbox.launch_argv(info, None, ["a", "b"]) == ["a", "b"]


def test_kill_strays_outside_a_sandbox_only_touches_descendants(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sandbox.OUTER_PIDNS_VAR, raising=False)
    real_kill = os.kill

    def guarded_kill(pid: int, sig: int) -> None:  # kill(-1) here would take down every process of ours
        assert pid > 0, "kill_strays signalled pid %d outside a sandbox" % pid
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", guarded_kill)
    child = subprocess.Popen(["sleep", "30"])
    # Not a descendant: its parent exits, so it is reparented away from us.
    other = subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    other_pid = int(other.stdout)
    try:
        assert sandbox.kill_strays([]) >= 1
        assert child.poll() is not None or child.wait(timeout=5) == -9
        real_kill(other_pid, 0)  # still alive: raises if it was killed
    finally:
        real_kill(other_pid, 9)


# --- functional ------------------------------------------------------------------------

@pytest.fixture(params=["bwrap", "namespaces"])
def mechanism(request: pytest.FixtureRequest) -> Any:
    info = sandbox.probe(request.param)
    if info.kind != request.param:
        pytest.skip("%s sandbox unavailable: %s" % (request.param, info.reason))
    return info


def run_in(info: Any, policy: Any, script: str, args: Sequence[str] = (), timeout: float = 60,
           **kwargs: Any) -> subprocess.CompletedProcess[str]:
    cmd = sandbox.launch_argv(info, policy, [sys.executable, "-c", textwrap.dedent(script)] + list(args))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(os.environ), **kwargs)


def result_of(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cannot_see_the_parent_or_its_secrets(mechanism: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KFORGE_TEST_API_KEY", SECRET)
    monkeypatch.setenv("TZ", SECRET)  # an allowed name with a secret value
    script = """
        import json, os, sys
        parent, secret = int(sys.argv[1]), sys.argv[2][::-1].encode()  # not in our own cmdline
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        leaks = []
        for pid in pids:
            for name in ("environ", "cmdline"):
                try:
                    if secret in open("/proc/%d/%s" % (pid, name), "rb").read():
                        leaks.append((pid, name))
                except OSError:
                    pass
        try:
            parent_environ = open("/proc/%d/environ" % parent, "rb").read().decode()
        except OSError as e:
            parent_environ = type(e).__name__
        print(json.dumps({"pids": pids, "leaks": leaks, "parent_environ": parent_environ,
                          "env": dict(os.environ)}))
    """
    r = result_of(run_in(mechanism, _policy(tmp_path), script, [str(os.getpid()), SECRET[::-1]]))
    assert os.getpid() not in r["pids"] and len(r["pids"]) <= 3, r["pids"]
    assert r["parent_environ"] == "FileNotFoundError"
    assert r["leaks"] == []
    assert not [k for k, v in r["env"].items() if SECRET in v or "API_KEY" in k]
    assert set(r["env"]) - {"PWD"} == set(sandbox.default_policy(HARNESS, [], True, dict(os.environ)).env) \
        | {sandbox.OUTER_PIDNS_VAR}


def test_filesystem_view(mechanism: Any, tmp_path: Path) -> None:
    policy = _policy(tmp_path)
    project, home = tmp_path / "project", tmp_path / "home"
    script = """
        import json, os, sys
        project, home = sys.argv[1:3]
        def attempt(fn):
            try:
                out = fn()
                return "ok" if out is None or isinstance(out, int) else out
            except OSError as e:
                return type(e).__name__
        def write(path):
            with open(path, "w") as f:
                f.write("pwned")
        print(json.dumps({
            "readme": attempt(lambda: open(project + "/readme.txt").read()),
            "write_project": attempt(lambda: write(project + "/new.txt")),
            "sessions": attempt(lambda: os.listdir(project + "/sessions")),
            "session_file": attempt(lambda: open(project + "/sessions/s1.json").read()),
            "write_sessions": attempt(lambda: write(project + "/sessions/new.json")),
            "config": attempt(lambda: open(project + "/config.toml").read()),
            "home_exists": os.path.exists(home),
            "netrc": attempt(lambda: open(home + "/.netrc").read()),
            "write_home": attempt(lambda: (os.makedirs(home, exist_ok=True), write(home + "/.bashrc"))),
            "write_tmp": attempt(lambda: write("/tmp/out.txt")),
            "write_shm": attempt(lambda: write("/dev/shm/out.txt")),
            "uid": os.getuid(),
            "write_usr": attempt(lambda: write("/usr/pwned")),
            "write_root": attempt(lambda: write("/pwned")),
            "root": sorted(os.listdir("/")),
            "dev": sorted(os.listdir("/dev")),
            "proc_sys_writable": os.access("/proc/sys/kernel/core_pattern", os.W_OK),
            "shadow": attempt(lambda: open("/etc/shadow").read()),
            "real_home": attempt(lambda: os.listdir(os.path.realpath(os.path.expanduser("~root")))),
        }))
    """
    args = [str(project), str(home)]
    r = result_of(run_in(mechanism, policy, script, args))
    assert r["readme"] == "visible"
    assert r["write_project"] == r["write_sessions"] == r["write_usr"] == r["write_root"] == "OSError"
    assert r["sessions"] == [] and r["session_file"] == "FileNotFoundError"
    assert r["config"] in ("", "PermissionError")  # covered by /dev/null (bwrap binds it nodev)
    assert r["home_exists"] is False and r["netrc"] == "FileNotFoundError"
    assert r["write_tmp"] == r["write_shm"] == "ok"  # its own, in memory
    assert not os.path.exists("/tmp/out.txt") and not os.path.exists("/dev/shm/out.txt")
    if os.geteuid() == 0 and mechanism.kind == "namespaces":
        assert r["uid"] == policy.uid != 0  # root's sandbox is an unprivileged host uid
    # The host is untouched (a write to $HOME's path lands in the sandbox's private /tmp).
    assert sorted(os.listdir(home)) == [".netrc"] and not (project / "new.txt").exists()
    assert sorted(os.listdir(project / "sessions")) == ["s1.json"]
    # The root holds the system dirs plus the first component of every path the policy binds
    # (the harness and Python install live wherever the checkout and the env are).
    bound = {p.split("/")[1] for p in policy.readonly_paths + policy.writable_paths + sandbox.python_paths()
             if p.startswith("/") and len(p) > 1}
    system = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "etc", "opt", "proc", "dev", "sys", "tmp"}
    assert set(r["root"]) <= system | bound, (r["root"], bound)
    assert set(r["dev"]) <= {"null", "zero", "full", "random", "urandom", "tty", "shm", "fd", "stdin",
                             "stdout", "stderr", "pts", "ptmx", "core"}, r["dev"]
    assert r["proc_sys_writable"] is False
    assert r["shadow"] == "" or r["shadow"].endswith("Error")
    assert r["real_home"] in ("FileNotFoundError", "PermissionError") or ".bash_history" not in r["real_home"]


def test_no_network(mechanism: Any, tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(5)
    server.setblocking(False)
    script = """
        import socket, sys
        try:
            socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
            print("connected")
        except OSError as e:
            print(type(e).__name__)
    """
    try:
        out = run_in(mechanism, _policy(tmp_path), script, [str(server.getsockname()[1])])
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() in ("ConnectionRefusedError", "OSError"), out.stdout
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody came
    finally:
        server.close()


def test_no_privileges(mechanism: Any, tmp_path: Path) -> None:
    script = """
        import json, os
        status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
        print(json.dumps({k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs")}))
    """
    r = result_of(run_in(mechanism, _policy(tmp_path), script))
    assert r == {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapBnd": "0" * 16, "CapAmb": "0" * 16,
                 "NoNewPrivs": "1"}


def _host_pids_with(marker: str) -> list[int]:
    found: list[int] = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(name))
        except (OSError, ValueError):
            pass
    return found


def test_daemon_dies_with_the_sandbox(mechanism: Any, tmp_path: Path) -> None:
    marker = "%d.%06d" % (900 + random.randrange(99), random.randrange(10 ** 6))  # sleep's argument
    ready = "/tmp/daemon-ready"  # the sandbox's own /tmp
    script = """
        import os, sys, time
        marker, ready = sys.argv[1:3]
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open(ready, "w").close()
                os.execv("/bin/sleep", ["sleep", marker])
            os._exit(0)
        while not os.path.exists(ready):
            time.sleep(0.01)
        print("ready", flush=True)
        sys.stdin.readline()
    """
    cmd = sandbox.launch_argv(mechanism, _policy(tmp_path), [sys.executable, "-c", textwrap.dedent(script), marker, ready])
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        deadline = time.time() + 5
        while not _host_pids_with(marker) and time.time() < deadline:
            time.sleep(0.02)
        assert _host_pids_with(marker), "the daemon never showed up: the test could not see it die"
        proc.stdin.write("\n")
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
        deadline = time.time() + 5
        while _host_pids_with(marker) and time.time() < deadline:
            time.sleep(0.02)
        assert _host_pids_with(marker) == [], "the daemon outlived the sandbox"
    finally:
        proc.kill()
        for pid in _host_pids_with(marker):
            os.kill(pid, 9)


def test_kill_strays_inside_the_sandbox(mechanism: Any, tmp_path: Path) -> None:
    script = LOAD_SANDBOX + textwrap.dedent("""
        import json, os, time
        def daemon(body):
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    body()
                os._exit(0)
            os.wait()
        def sleeper():
            os.execv("/bin/sleep", ["sleep", "600"])
        def hopper():  # changes pid all the time: fork, let the child go on, exit
            while True:
                if os.fork():
                    os._exit(0)
        def spawner():  # one more sleeping process every 2 ms, forever
            while True:
                if os.fork() == 0:
                    time.sleep(600)
                time.sleep(0.002)
        for body in (sleeper, hopper, spawner):
            daemon(body)
        time.sleep(0.3)
        before = len(sb._processes())
        killed = sb.kill_strays([])
        time.sleep(0.2)
        print(json.dumps({"before": before, "killed": killed, "after": sorted(sb._processes()),
                          "me": os.getpid()}))
    """)
    r = result_of(run_in(mechanism, _policy(tmp_path), script))
    assert r["before"] > 10, r  # the spawner had been busy: there was something to kill
    assert r["killed"] >= r["before"] - 2
    assert set(r["after"]) <= {1, r["me"]}, r


def test_hardened_processes_are_opaque_to_their_kin(mechanism: Any, tmp_path: Path) -> None:
    script = LOAD_SANDBOX + textwrap.dedent("""
        import json, os, time
        def peek(pid):
            out = []
            for name in ("environ", "mem"):
                try:
                    open("/proc/%d/%s" % (pid, name), "rb").close()
                    out.append("ok")
                except OSError as e:
                    out.append(type(e).__name__)
            return out
        r = {}
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        extra = os.open("/dev/null", os.O_RDONLY)
        child = os.fork()
        if child == 0:
            os.read(go_r, 1)
            sb.harden_worker([1, 2, done_w], {"nofile": 64, "core": 0})
            fds = sorted(int(f) for f in os.listdir("/proc/self/fd"))
            maps = len(open("/proc/self/maps").read()) > 0  # its own /proc still works
            os.write(done_w, json.dumps([fds, maps, done_w]).encode())
            time.sleep(30)  # killed by the parent once looked at
            os._exit(0)
        r["before"] = peek(child)  # control: a plain same-uid child is readable
        os.write(go_w, b"x")
        r["worker_fds"], r["worker_maps"], r["done_w"] = json.loads(os.read(done_r, 4096))
        r["after"] = peek(child)
        os.kill(child, 9)
        os.waitpid(child, 0)
        sb.harden_zygote()
        w = os.fork()
        if w == 0:  # a worker peeking at its zygote
            os.write(done_w, json.dumps(peek(os.getppid())).encode())
            os._exit(0)
        r["zygote"] = json.loads(os.read(done_r, 4096))
        os.waitpid(w, 0)
        print(json.dumps(r))
    """)
    r = result_of(run_in(mechanism, _policy(tmp_path), script))
    assert r["before"] == ["ok", "ok"], r
    assert r["after"] == ["PermissionError", "PermissionError"], r
    assert r["zygote"] == ["PermissionError", "PermissionError"], r
    assert r["worker_maps"] is True
    # 1, 2 and done_w kept; one more is the listing's own (the lowest free number, 0).
    assert {1, 2, r["done_w"]} < set(r["worker_fds"]) and len(r["worker_fds"]) == 4, r


def test_torch_and_triton_work_inside(mechanism: Any, tmp_path: Path) -> None:
    script = """
        import json, os
        import torch, triton, triton.language as tl

        @triton.jit
        def double(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)

        x = torch.arange(100, dtype=torch.float32)
        out = torch.empty_like(x)
        double[(4,)](x, out, 100, BLOCK=32)
        print(json.dumps({"ok": bool(torch.equal(out, x * 2)), "interpret": os.environ["TRITON_INTERPRET"]}))
    """
    r = result_of(run_in(mechanism, _policy(tmp_path), script, timeout=120))
    assert r == {"ok": True, "interpret": "1"}


def test_root_sandbox_enforces_the_process_limit(mechanism: Any, tmp_path: Path) -> None:
    """Run by root, RLIMIT_NPROC binds only because the sandbox is a non-zero host uid."""
    import dataclasses

    if os.geteuid() != 0 or mechanism.kind != "namespaces":
        pytest.skip("only root's namespaces sandbox changes uid")
    policy = dataclasses.replace(_policy(tmp_path), limits={"nproc": 40})
    script = """
        import json, os, time
        started, error = 0, None
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError as e:
                error = e.errno
                break
            if pid == 0:
                time.sleep(30)
                os._exit(0)
            started += 1
        print(json.dumps({"started": started, "errno": error, "uid": os.getuid()}))
    """
    r = result_of(run_in(mechanism, policy, script))
    assert r["uid"] != 0 and r["errno"] == 11 and r["started"] < 40, r  # EAGAIN
