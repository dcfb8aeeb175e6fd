"""`--machine`: machine instructions per fwd+bwd step, counted by valgrind's callgrind.

Python instructions (`--bytecodes`) are an exact count but a poor proxy for time: one call of
`map()` over a one-item tuple is 2 bytecodes and about 1,300 machine instructions, a tensor
attribute (`x.shape`) 1 bytecode and 500-900. Callgrind counts every machine instruction the
process executes, the same on every run for one build of Python and torch, so revisions and
implementations compare exactly, including the C code of torch and of the interpreter.

Each implementation runs twice in a child process under `valgrind --tool=callgrind`, which
counts only inside `exec` (`--toggle-collect=builtin_exec`; every import runs its module
through `exec` too): the child warms up, freezes what the garbage collector tracks (as the
timed run does), then runs the measured steps in one `exec`, 0 steps the first time and n the
second. The difference over n is the
count per step. About two minutes per implementation; needs valgrind (Debian: `apt-get install valgrind`) and a Python
whose shared library has its symbols (pyenv's has).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

_CHILD = """
import sys
sys.path.insert(0, {here!r})
import _profile
step = _profile._steps()[{case!r}][{impl!r}]
for _ in range(50):
    step()
import gc
gc.collect()
gc.freeze()
exec("for _ in range({n}):\\n    step()")
"""


def _count(case: str, impl: str, n: int) -> float:
    return (_total(case, impl, n) - _total(case, impl, 0)) / n


def _total(case: str, impl: str, n: int) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--toggle-collect=builtin_exec",
             f"--callgrind-out-file={out}", sys.executable, "-c",
             _CHILD.format(here=here, case=case, impl=impl, n=n)],
            check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        with open(out) as file:
            totals = re.search(r"^(?:summary|totals): (\d+)", file.read(), re.MULTILINE)
    if totals is None:
        raise RuntimeError("callgrind wrote no total")
    return int(totals.group(1))


def machine(steps: int = 300) -> str:
    if shutil.which("valgrind") is None:
        return "--machine needs valgrind (Debian: apt-get install valgrind)"
    import _profile

    cases = {case: list(impls) for case, impls in _profile._steps().items()}
    jobs = [(case, impl) for case, impls in cases.items() for impl in impls]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _count(*job, steps), jobs), strict=True))
    lines = [f"Machine instructions per fwd+bwd step (callgrind, {steps} steps each):"]
    for case, impls in cases.items():
        lines.append(f"{case}:")
        reference = counts[(case, impls[0])]
        for impl in impls:
            count = counts[(case, impl)]
            lines.append(f"  {impl:40s} {count:10,.0f}  ratio {count / reference:.3f}")
    return "\n".join(lines)
