"""Entry points:

    python -m kforge_harness serve [--hide PATH]...   the long-lived server kforge talks to
    python -m kforge_harness zygote FD SCRATCH SANDBOXED ROLE   (started by the server, in a sandbox)
    python -m kforge_harness sandbox-init POLICY -- ARGV...   (the namespaces sandbox's setup)
    python -m kforge_harness profile JOB               one forward under Nsight Compute
    python -m kforge_harness static-check FILE [--reject-torch-ops]
    python -m kforge_harness ttir                      (compiled.py: a kernel's launches to TTIR, on the CPU)
"""

from __future__ import annotations

import json
import sys
from typing import List


def main(argv: List[str]) -> int:
    command = argv[1] if len(argv) > 1 else ""
    if command == "serve":
        from .server import serve as serve_evaluations

        hidden = [argv[i + 1] for i in range(2, len(argv) - 1) if argv[i] == "--hide"]
        status: int = serve_evaluations(hidden)
        return status
    if command == "zygote" and len(argv) == 6:
        from .zygote import ROLES, serve as serve_zygote

        if argv[5] in ROLES:
            return serve_zygote(int(argv[2]), argv[3], argv[4] == "1", argv[5])
    if command == "sandbox-init":
        from .sandbox import main_sandbox_init

        return main_sandbox_init(argv)
    if command == "profile" and len(argv) == 3:
        from .ncu import profile_main

        profile_main(argv[2])
        return 0
    if command == "ttir":
        from .compiled import compile_main

        return compile_main(sys.stdin, sys.stdout)
    if command == "static-check" and len(argv) >= 3:
        from .static import static_check

        with open(argv[2]) as f:
            category, report, _ = static_check(f.read(), "--reject-torch-ops" in argv)
        print(json.dumps({"category": category, "report": report}, indent=2))
        return 1 if category else 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
