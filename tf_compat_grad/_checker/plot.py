"""`check --plot DIR`: one picture per function, its custom gradient against the true derivative
along a line through the example input, so that a surrogate's shape and a bug's offset show at a
glance. Needs matplotlib (the `plot` extra).

Along `x + t d` (d a random unit direction over the floating-point inputs, u a random upstream
gradient), the top panel draws `phi(t) = <f(x + t d), u>` and the bottom one the directional
derivative two ways: the custom gradient's `<grad_fn(u), d>`, and the true `phi'(t)` by central
finite differences. Where the true derivative jumps between two steps (a kink of f) a vertical
line marks it; t = 0 is the example input.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .numerics import EPS, F64, _dot, _float_outputs, _random_like, _seeded, _vjp
from .report import Report
from .subject import _Inputs, _Subject, resolve_example

STEPS = 201  # points along the line
SPAN = 1.0  # t from -SPAN to SPAN; d has unit norm
KINK_JUMP = 10.0  # a change of the true derivative this many times the median change: a kink


def missing() -> str:
    """What to install for `--plot`; empty when matplotlib is there."""
    if importlib.util.find_spec("matplotlib") is None:
        return "matplotlib, which is not installed: pip install 'tf-compat-grad[plot]'"
    return ""


def along_the_line(
    fn: Callable[..., Any], example: Any, surrogate: str | None = None
) -> dict[str, list[float]]:
    """The values the picture draws: `t`, `phi`, `custom` and `true` (the directional
    derivatives) and `kinks` (the t where the true derivative jumps)."""
    with _seeded(0):
        subject = _Subject(fn, resolve_example(example), surrogate)
        inputs = _Inputs(subject, F64)
        if not inputs.inputs:
            raise ValueError("no floating-point tensor input to move along")
        directions = _random_like(inputs.inputs, 7)
        norm = math.sqrt(sum(float((d * d).sum()) for d in directions))
        directions = [d / norm for d in directions]
        upstreams = _random_like(_float_outputs(inputs.call()), 0)

    def at(t: float, *, grad: bool) -> tuple[float, float]:
        moved = _Inputs(subject, F64)
        with torch.no_grad():
            for x, d in zip(moved.inputs, directions, strict=True):
                x.add_(t * d)
        with _seeded(0), torch.set_grad_enabled(grad):
            outputs = _float_outputs(moved.call())
            phi = float(_dot(outputs, upstreams).detach())
            if not grad:
                return phi, 0.0
            g = _vjp(outputs, upstreams, moved.inputs)
        return phi, sum(float((gi * d).sum()) for gi, d in zip(g, directions, strict=True))

    ts = [SPAN * (2 * i / (STEPS - 1) - 1) for i in range(STEPS)]
    phi, custom, true = [], [], []
    for t in ts:
        value, slope = at(t, grad=True)
        phi.append(value)
        custom.append(slope)
        true.append((at(t + EPS, grad=False)[0] - at(t - EPS, grad=False)[0]) / (2 * EPS))
    changes = [abs(b - a) for a, b in itertools.pairwise(true)]
    typical = sorted(changes)[len(changes) // 2]
    scale = max(1.0, *(abs(v) for v in true if math.isfinite(v)))
    kinks = [
        (ts[i] + ts[i + 1]) / 2
        for i, c in enumerate(changes)
        if c > KINK_JUMP * typical + 1e-6 * scale
    ]
    return {"t": ts, "phi": phi, "custom": custom, "true": true, "kinks": kinks}


def draw(fn: Callable[..., Any], example: Any, report: Report, directory: Path) -> Path:
    """Draw `fn`'s picture into `directory`; returns the file written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    line = along_the_line(fn, example, report.surrogate)
    figure = Figure(figsize=(7, 5.5), layout="constrained")
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=[1, 1.4])
    top.plot(line["t"], line["phi"], color="black")
    top.set_ylabel("<f(x + t d), u>")
    bottom.plot(line["t"], line["true"], color="tab:blue", lw=3, alpha=0.5, label="true derivative")
    bottom.plot(line["t"], line["custom"], color="tab:red", lw=1.5, label="custom gradient")
    bottom.set_ylabel("directional derivative")
    bottom.set_xlabel("step t along a random direction d (t = 0: the example input)")
    for axes in (top, bottom):
        axes.axvline(0.0, color="grey", ls=":", lw=1)
        for k, t in enumerate(line["kinks"]):
            axes.axvline(t, color="tab:orange", ls="--", lw=1, label="kink" if k == 0 else None)
    bottom.legend(loc="best", fontsize="small")
    verdict = (
        f"declared surrogate: {report.surrogate}"
        if report.surrogate
        else "; ".join(f"{r.check} {r.status.value}" for r in report if r.check == "numerical")
    )
    figure.suptitle(f"{report.function}\n{verdict}", fontsize="medium")
    path = directory / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', report.function)}.png"
    figure.savefig(path, dpi=100)
    return path
