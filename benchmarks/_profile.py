"""cProfile of the tf_compat_grad `log1pexp` n=100 fwd+bwd step: where the overhead goes."""

from __future__ import annotations

import cProfile
import io
import os
import pstats

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
