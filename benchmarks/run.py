"""Benchmark tf_compat_grad against a hand-written `torch.autograd.Function` and native autograd.

    python benchmarks/run.py [--quick] [--json FILE] [--plot FILE.png] [--cases KEY,...]
    python benchmarks/run.py --profile
    python benchmarks/run.py --bytecodes
    python benchmarks/run.py --machine
    python benchmarks/run.py --floor
    python benchmarks/run.py --docs results.json   # rewrite docs/performance.md's table

See benchmarks/README.md for what each figure means and how it is measured.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _memory
import _redecorate
import _report
import _timing
import torch
from _cases import CASES, FUNCTION, IMPLS, TF

SETTINGS = {
    # repetitions and block length of the eager timings, and of the compiled timings
    "quick": {"repetitions": 11, "block_seconds": 0.01, "compiled_repetitions": 7,
              "backend": "aot_eager"},
    "full": {"repetitions": 101, "block_seconds": 0.01, "compiled_repetitions": 41,
             "backend": "inductor"},
}  # fmt: skip


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _revision() -> str:
    """The library's git commit, with "+changes" when the work tree differs from it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "tf_compat_grad"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return (commit or "unknown") + ("+changes" if dirty else "")


def run(mode: str, keys: list[str] | None, compile_: bool, seed: int) -> dict[str, Any]:
    settings = SETTINGS[mode]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    cases = [case for case in CASES if keys is None or case.key in keys]
    start = time.perf_counter()
    impls = {case.key: {name: case.make(name) for name in IMPLS} for case in cases}
    # Everything made so far lives to the end: freezing it makes each gc.collect() (before every
    # timed block) and every automatic collection inside a block cheap and alike.
    gc.collect()
    gc.freeze()
    results: list[dict[str, Any]] = []
    for case in cases:
        _log(f"timing {case.title}")
        made = impls[case.key]
        timing = {
            "repetitions": settings["repetitions"],
            "block_seconds": settings["block_seconds"],
        }
        results.append(
            {
                "key": case.key,
                "title": case.title,
                "label": case.label,
                "fwd_bwd": _timing.compare(
                    {name: impl.step for name, impl in made.items()}, FUNCTION, rng=rng, **timing
                ),
                "no_grad_forward": _timing.compare(
                    {name: impl.forward for name, impl in made.items()},
                    FUNCTION,
                    rng=rng,
                    no_grad=True,
                    **timing,
                ),
            }
        )
        if case.key in _redecorate.IN_FORWARD:
            results[-1]["redecorated"] = _redecorate.compare(case.key, made[TF], rng=rng, **timing)
    for case, result in zip(cases, results, strict=True):
        _log(f"memory {case.title}")
        result["memory"] = {name: _memory.measure(impl) for name, impl in impls[case.key].items()}
    if compile_:
        import _compiled  # imports torch._dynamo only now, after the eager figures

        for case, result in zip(cases, results, strict=True):
            _log(f"torch.compile {case.title} ({settings['backend']})")
            result["compiled"] = _compiled.measure(
                case,
                settings["backend"],
                repetitions=settings["compiled_repetitions"],
                block_seconds=settings["block_seconds"],
                rng=rng,
            )
    elapsed = time.perf_counter() - start
    meta = {
        "mode": mode,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__,
        "tf_compat_grad": _revision(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "clock": _timing.CLOCK_NAME,
        "seed": seed,
        "elapsed_seconds": elapsed,
        **settings,
    }
    return {"meta": meta, "targets": _report.targets(results), "cases": results}


def _rewrite_docs(json_path: str) -> None:
    page = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
    with open(json_path) as file:
        table = _report.docs_table(json.load(file))
    text = page.read_text()
    start = text.index(_report.TABLE_START) + len(_report.TABLE_START)
    page.write_text(text[:start] + "\n" + table + "\n" + text[text.index(_report.TABLE_END) :])
    print(f"docs/performance.md's benchmark table rewritten from {json_path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, aot_eager")
    parser.add_argument("--json", metavar="FILE", help="write every figure to FILE")
    parser.add_argument("--plot", metavar="FILE.png", help="bar chart of the ratios")
    parser.add_argument("--cases", help="comma-separated case keys (default: all)")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffles and inputs")
    parser.add_argument(
        "--clock", choices=sorted(_timing.CLOCKS), default="cpu", help="what a block's time is"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1, see benchmarks/README.md)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="only cProfile the log1pexp n=100 path"
    )
    parser.add_argument(
        "--bytecodes",
        action="store_true",
        help="only count the Python instructions and garbage-collected objects of a log1pexp n=100 step and of a linear layer",
    )
    parser.add_argument(
        "--machine",
        action="store_true",
        help="only count the machine instructions of those steps under valgrind (minutes)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="only log1pexp n=100 against the bare layout and a minimal decorator",
    )
    parser.add_argument(
        "--docs",
        metavar="JSON",
        help="only rewrite docs/performance.md's benchmark table from a run's JSON (e.g. results.json)",
    )
    args = parser.parse_args(argv)
    if args.docs:
        _rewrite_docs(args.docs)
        return 0
    if args.profile:
        import _profile

        print(_profile.profile())
        return 0
    if args.bytecodes:
        import _profile

        print(_profile.bytecodes())
        return 0
    if args.machine:
        import _machine

        print(_machine.machine())
        return 0
    torch.set_num_threads(args.threads)
    _timing.use_clock(args.clock)
    if args.floor:
        import _floor

        print(_floor.floor(seed=args.seed))
        return 0
    keys = args.cases.split(",") if args.cases else None
    if keys:
        unknown = set(keys) - {case.key for case in CASES}
        if unknown:
            parser.error(f"unknown case(s) {sorted(unknown)}; known: {[c.key for c in CASES]}")
    report = run("quick" if args.quick else "full", keys, not args.no_compile, args.seed)
    print(_report.text(report))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(report, file, indent=1)
            file.write("\n")
    if args.plot:
        _report.plot(report, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
