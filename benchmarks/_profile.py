"""Where the overhead of the tf_compat_grad `log1pexp` n=100 fwd+bwd step goes: cProfile
(`--profile`) and exact counts of the Python bytecode instructions executed (`--bytecodes`)."""

from __future__ import annotations

import cProfile
import functools
import gc
import io
import os
import pstats
import sys
import types
from collections import Counter
from typing import Any

import _redecorate
import torch
from _cases import CASES, FUNCTION, N100_CASES, TF, _flat

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
    """Python bytecode instructions and garbage-collected objects of one fwd+bwd step: log1pexp
    n=100 (the hand-written Function, the minimal decorator of `--floor`, tf_compat_grad), a
    linear layer of width 8, batch 4, and the benchmark's MLP of 3 such layers, where the kernels
    cost almost nothing (the Function, and tf_compat_grad with the Parameters as arguments or
    read from the closure), and the other n=100
    ops of `_cases.py` (the Function and tf_compat_grad), each also as a forward alone under
    `torch.no_grad()`; and, for tf_compat_grad's log1pexp, the instructions per function of the
    library.

    Unlike timings, instruction counts are the same on every run and every machine (for one
    Python and torch version), so they compare revisions exactly. Counted with `sys.settrace`
    opcode events, on the second step (the first fills lazy caches). Objects: how many objects
    the garbage collector tracks are alive after the forward and were not before (what the
    graph keeps until backward; counted with `gc.get_count()` with the collector off), and
    how many collections the collector, on and with its default thresholds, runs per 1000 steps.
    """
    steps = _steps()
    out = io.StringIO()
    out.write(
        "Per fwd+bwd step: Python bytecode instructions; objects tracked by the garbage "
        "collector that the forward leaves alive; collections per 1000 steps; Python "
        "instructions of the forward alone under torch.no_grad()\n"
    )
    mine: Counter[tuple[str, str]] = Counter()
    for case, impls in steps.items():
        out.write(f"{case}:\n")
        reference = None
        for name, step in impls.items():
            counts = step.count()
            total = sum(counts.values())
            reference = total if reference is None else reference
            no_grad = "" if name == "minimal" else f"{step.count_no_grad():5d}"
            out.write(
                f"  {name:40s} {total:6d} ({total - reference:+5d})  no-grad forward "
                f"{no_grad:>5s}  objects {step.kept():3d}  collections {step.collections():4.1f}\n"
            )
            if name == TF and case == "log1pexp n=100":
                mine = counts
    ours = [(n, where) for where, n in mine.items() if "tf_compat_grad" in where[0]]
    ours.sort(reverse=True)
    out.write(
        f"\ntf_compat_grad's own functions in a log1pexp step ({sum(n for n, _ in ours)} "
        "instructions):\n"
    )
    for n, (path, name) in ours[:top]:
        out.write(f"  {n:5d}  {path.split(PACKAGE)[-1]}({name})\n")
    out.write("\n" + _redecorate.text())
    return out.getvalue()


def _steps() -> dict[str, dict[str, _Step]]:
    """The steps `--bytecodes` and `--machine` count, by case and implementation."""
    from _cases import (
        MLP,
        LinearFunction,
        Log1pexpFunction,
        linear_args,
        log1pexp,
        make_closure_linear,
    )
    from _floor import _f, _minimal

    x = torch.randn(100, requires_grad=True)
    minimal = _minimal(_f)
    gen = torch.Generator().manual_seed(0)
    xl = torch.randn(4, 8, generator=gen, requires_grad=True)
    w = torch.nn.Parameter(torch.randn(8, 8, generator=gen))
    b = torch.nn.Parameter(torch.zeros(8))
    closure = make_closure_linear(w, b)
    steps: dict[str, dict[str, _Step]] = {
        "log1pexp n=100": {
            "Function": _Step(lambda: Log1pexpFunction.apply(x), [x]),
            "minimal": _Step(lambda: minimal(x), [x]),
            TF: _Step(lambda: log1pexp(x), [x]),
        },
        "log1pexp n=100, decorated on every call": {
            "decorated once": _Step(lambda: log1pexp(x), [x]),
            "decorated in forward": _Step(lambda: _redecorate.decorated_in_forward(x), [x]),
            "defined in forward": _Step(lambda: _redecorate.defined_in_forward(x), [x]),
        },
        "linear layer, width 8": {
            "Function": _Step(lambda: LinearFunction.apply(xl, w, b), [xl, w, b]),
            f"{TF} (Parameters as arguments)": _Step(lambda: linear_args(xl, w, b), [xl, w, b]),
            f"{TF} (closure Parameters)": _Step(lambda: closure(xl), [xl, w, b]),
        },
    }
    # The MLP of the timed run, narrow enough that its kernels cost almost nothing.
    xm = torch.randn(4, 8, generator=gen)
    mlps = {form: MLP(form, width=8, depth=3, seed=0) for form in ("function", "args", "closure")}
    steps["MLP, 3 layers of width 8, batch 4"] = {
        name: _Step(functools.partial(mlps[form], xm), list(mlps[form].parameters()))
        for name, form in (
            ("Function", "function"),
            (f"{TF} (Parameters as arguments)", "args"),
            (f"{TF} (closure Parameters)", "closure"),
        )
    }
    for case in CASES:  # the other n=100 ops, as the timed run calls them
        if case.key in N100_CASES and case.key != "log1pexp_n100":
            impls = {name: case.make(name) for name in (FUNCTION, TF)}
            steps[case.title] = {
                name: _Step(functools.partial(impl.fn, *impl.args), impl.leaves)
                for name, impl in impls.items()
            }
    return steps


def _count(run: Any) -> Counter[tuple[str, str]]:
    """Python instructions of one call of run, by code object (file, name)."""
    counts: Counter[tuple[str, str]] = Counter()

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            counts[(frame.f_code.co_filename, frame.f_code.co_name)] += 1
        return trace

    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return counts


class _Step:
    """One fwd+bwd step: a forward, backward of ones, `.grad = None` on the leaves."""

    def __init__(self, forward: Any, leaves: list[torch.Tensor]) -> None:
        self.forward = forward
        self.leaves = leaves
        self.upstream = [torch.ones_like(y) for y in _flat(forward())]

    def __call__(self) -> None:
        y = self.forward()
        if type(y) is torch.Tensor:  # the bare step of one output
            y.backward(self.upstream[0])
        else:
            torch.autograd.backward(_flat(y), self.upstream)
        for leaf in self.leaves:
            leaf.grad = None

    def count_no_grad(self) -> int:
        """Python instructions of one forward under `torch.no_grad()`."""
        with torch.no_grad():
            self.forward()
            counts = _count(self.forward)
        return sum(counts.values())

    def count(self) -> Counter[tuple[str, str]]:
        self()
        return _count(self)

    def kept(self) -> int:
        gc.collect()
        gc.disable()
        # Far from zero, gen0's count goes down on every free (it stops at zero).
        hold = [[i] for i in range(1000)]
        try:
            before = gc.get_count()[0]
            y = self.forward()
            after = gc.get_count()[0]
            torch.autograd.backward(_flat(y), self.upstream)
        finally:
            del hold
            gc.enable()
        for leaf in self.leaves:
            leaf.grad = None
        return after - before

    def collections(self, steps: int = 2000) -> float:
        started = [0]

        def callback(phase: str, info: dict[str, Any]) -> None:
            started[0] += phase == "start"

        gc.collect()
        gc.callbacks.append(callback)
        try:
            for _ in range(steps):
                self()
        finally:
            gc.callbacks.remove(callback)
        return started[0] * 1000 / steps
