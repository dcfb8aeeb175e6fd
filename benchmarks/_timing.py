"""Interleaved timing: every repetition times each implementation once, in a shuffled order,
and the figure reported is the median over repetitions of each one's time divided by the
reference's time *in the same repetition*.

On a shared 2-core machine the speed drifts by tens of percent over seconds; a drift that lasts
longer than one repetition (a few blocks) scales the reference and the others alike and cancels
in the ratio, and shuffling stops a steady ordering effect (a cache warmed by the block before,
CPU frequency ramping within a repetition) from always favouring the same implementation.
"""

from __future__ import annotations

import contextlib
import gc
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

MIN_CALLS = 5  # per block: one call of a large op varies a lot with the allocator's state
CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}
CLOCK_NAME = "cpu"
_clock = CLOCKS[CLOCK_NAME]


def use_clock(name: str) -> None:
    global _clock, CLOCK_NAME
    _clock, CLOCK_NAME = CLOCKS[name], name


def _block(call: Callable[[], Any], n: int, context: Callable[[], Any]) -> float:
    """Seconds per call over `n` back-to-back calls."""
    with context():
        start = _clock()
        for _ in range(n):
            call()
        return (_clock() - start) / n


def _calibrate(call: Callable[[], Any], context: Callable[[], Any], budget: float) -> float:
    """Seconds per call, from as many calls as fit in `budget` seconds (at least 3)."""
    n, total, seconds = 1, 0, 0.0
    while True:
        seconds += _block(call, n, context) * n
        total += n
        if seconds >= budget and total >= 3:
            return seconds / total
        n *= 2


def _quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) < 2:
        return values[0], values[0], values[0]
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def compare(
    calls: dict[str, Callable[[], Any]],
    reference: str,
    *,
    repetitions: int,
    block_seconds: float,
    rng: random.Random,
    no_grad: bool = False,
) -> dict[str, dict[str, Any]]:
    """Time each call in interleaved blocks; ratios to `calls[reference]`.

    Every block runs the same number of calls, chosen so that the reference's block lasts about
    `block_seconds`, and at least MIN_CALLS. A full `gc.collect()` before each block (cheap: the harness freezes the
    objects made before timing) keeps one implementation's garbage out of the next one's block.
    """
    import torch

    context: Callable[[], Any] = torch.no_grad if no_grad else contextlib.nullcontext
    per_call = {}
    for name, call in calls.items():
        _block(call, 2, context)  # first calls: lazy caches, allocator
        per_call[name] = _calibrate(call, context, budget=max(block_seconds, 0.02))
    n = max(MIN_CALLS, round(block_seconds / per_call[reference]))
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repetitions):
        order = list(calls)
        rng.shuffle(order)
        for name in order:
            gc.collect()
            times[name].append(_block(calls[name], n, context))
    result = {}
    for name in calls:
        ratios = [t / r for t, r in zip(times[name], times[reference], strict=True)]
        q1, median, q3 = _quartiles(ratios)
        result[name] = {
            "ratio": median,
            "ratio_q1": q1,
            "ratio_q3": q3,
            "seconds_per_call": statistics.median(times[name]),
            "calls_per_block": n,
            "repetitions": repetitions,
        }
    return result
