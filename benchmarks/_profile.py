"""Where the overhead of the tf_compat_grad `log1pexp` n=100 fwd+bwd step goes: cProfile
(`--profile`) and exact counts of the Python bytecode instructions executed (`--bytecodes`)."""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys
import types
from collections import Counter
from typing import Any

import torch
from _cases import CASES, TF

PACKAGE = os.sep + "tf_compat_grad" + os.sep


def profile(calls: int = 5000, top: int = 20) -> str:
    case = next(c for c in CASES if c.key == "log1pexp_n100")
    impl = case.make(TF)
    for _ in range(200):
        impl.step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        impl.step()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
        if PACKAGE in path:
            where = f"{path.split(PACKAGE)[-1]}:{line}({name})"
            rows.append((cumtime, tottime, ncalls, where))
    rows.sort(reverse=True)
    out = io.StringIO()
    out.write(
        f"cProfile of {calls} tf_compat_grad log1pexp n=100 fwd+bwd steps: "
        f"{total / calls * 1e6:.1f} us per step under the profiler\n"
        "Functions inside tf_compat_grad by cumulative time (us per step; % of the step):\n"
    )
    out.write(f"{'cumulative':>11} {'own':>8} {'calls':>6}  function\n")
    for cumtime, tottime, ncalls, where in rows[:top]:
        out.write(
            f"{cumtime / calls * 1e6:7.1f} {100 * cumtime / total:2.0f}% "
            f"{tottime / calls * 1e6:8.1f} {ncalls / calls:6.1f}  {where}\n"
        )
    out.write(f"\nTop 15 by own time, all functions (seconds over the {calls} steps):\n")
    stats_out = io.StringIO()
    pstats.Stats(profiler, stream=stats_out).sort_stats("tottime").print_stats(15)
    listing = stats_out.getvalue()
    out.write(listing[listing.find("   ncalls") :].rstrip() + "\n")
    return out.getvalue()


def bytecodes(top: int = 20) -> str:
    """Python bytecode instructions executed by one log1pexp n=100 fwd+bwd step, per
    implementation and, for tf_compat_grad, per function of the library.

    Unlike timings, these counts are the same on every run and every machine (for one Python
    and torch version), so they compare revisions exactly; an instruction costs roughly
    15-30 ns on this machine. Counted with `sys.settrace` opcode events, on the second step (the
    first fills lazy caches)."""
    from _cases import Log1pexpFunction, log1pexp
    from _floor import _f, _minimal

    x = torch.randn(100, requires_grad=True)
    upstream = torch.ones(100)
    impls = {"Function": Log1pexpFunction.apply, "minimal": _minimal(_f), TF: log1pexp}
    counts = {name: _count(fn, x, upstream) for name, fn in impls.items()}
    totals = {name: sum(c.values()) for name, c in counts.items()}
    out = io.StringIO()
    out.write("Python bytecode instructions per log1pexp n=100 fwd+bwd step:\n")
    for name, total in totals.items():
        extra = total - totals["Function"]
        out.write(f"  {name:15s} {total:6d}  ({extra:+d} against the Function)\n")
    ours = [(n, where) for where, n in counts[TF].items() if PACKAGE in where[0]]
    ours.sort(reverse=True)
    out.write(f"\ntf_compat_grad's own functions ({sum(n for n, _ in ours)} instructions):\n")
    for n, (path, name) in ours[:top]:
        out.write(f"  {n:5d}  {path.split(PACKAGE)[-1]}({name})\n")
    return out.getvalue()


def _count(fn: Any, x: torch.Tensor, upstream: torch.Tensor) -> Counter[tuple[str, str]]:
    counts: Counter[tuple[str, str]] = Counter()

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts[(frame.f_code.co_filename, frame.f_code.co_name)] += 1
        return trace

    for counting in (False, True):
        if counting:
            sys.settrace(trace)
        try:
            fn(x).backward(upstream)
        finally:
            sys.settrace(None)
        x.grad = None
    return counts
