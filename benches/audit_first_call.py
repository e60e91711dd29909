"""What the first audited forward costs in a fresh worker on a GPU, and which modules it
imports: the process imports torch, triton and the modules the zygote preloads, forks (as
the zygote does), and the child times two audited forwards of the ReLU fixture.

    python3 benches/audit_first_call.py     (from the repository root, on a CUDA machine)

Figures in docs/benchmarks.md (issue 8, per-evaluation overhead).
"""
import os, sys, time, cProfile, pstats, io, importlib
sys.path.insert(0, "src/eval/harness")
import torch, triton
for n in ("torch.utils._python_dispatch", "torch._higher_order_ops.triton_kernel_wrap"):
    importlib.import_module(n)
from kforge_harness import audit
from kforge_harness.loading import load_module
pid = os.fork()
if pid == 0:
    k = load_module("tests/fixtures/kernels/relu_ok.py", "kk")
    m = k.ModelNew().cuda()
    x = torch.randn(4096, 5120, device="cuda")
    m(x); torch.cuda.synchronize()
    before = set(sys.modules)
    t0 = time.time(); out, rec = audit.audited_forward(m, [x], "cuda:0", ["relu_kernel"]); torch.cuda.synchronize(); print("audited_forward (forked, preimported)", time.time() - t0)
    new = sorted(set(sys.modules) - before); print(len(new), "new modules"); print(" ".join(n for n in new if n.count(".") <= 2)[:3000])
    t0 = time.time(); out, rec = audit.audited_forward(m, [x], "cuda:0", ["relu_kernel"]); torch.cuda.synchronize(); print("again", time.time() - t0)
    os._exit(0)
os.waitpid(pid, 0)
