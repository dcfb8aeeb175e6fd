"""`torch.compile(fullgraph=True)`: graphs made, recompiles over 10 calls, the Dynamo guards of
the compiled frame, and compiled fwd+bwd time relative to the compiled hand-written Function.

`torch._dynamo` is imported here only, when this measurement starts, after every eager figure
has been taken.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from _cases import FUNCTION, IMPLS, Case
from _timing import compare

CALLS = 10


class CountingBackend:
    """A Dynamo backend that counts the graphs it is given and hands them to a real backend."""

    def __init__(self, name: str) -> None:
        from torch._dynamo.backends.registry import lookup_backend

        self.inner = lookup_backend(name)
        self.graphs = 0

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.graphs += 1
        return self.inner(gm, example_inputs)


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def measure(
    case: Case,
    backend: str,
    *,
    repetitions: int,
    block_seconds: float,
    rng: random.Random,
) -> dict[str, Any]:
    """Per implementation: graphs after the first call, recompiles in calls 2-10, and the
    interleaved timing of the compiled steps (if the reference compiled)."""
    import torch._dynamo

    torch._dynamo.reset()
    result: dict[str, Any] = {"backend": backend}
    steps: dict[str, Callable[[], None]] = {}
    for name in IMPLS:
        impl = case.make(name)
        counter = CountingBackend(backend)
        step = impl.compiled_step(counter)
        try:
            step()
            graphs = counter.graphs
            for _ in range(CALLS - 1):
                step()
        except Exception as exc:  # a graph break under fullgraph=True, or a compiler error
            result[name] = {"error": _error(exc)}
            continue
        result[name] = {"graphs": graphs, "recompiles": counter.graphs - graphs}
        steps[name] = step
    if FUNCTION in steps:
        timing = compare(
            steps,
            FUNCTION,
            repetitions=repetitions,
            block_seconds=block_seconds,
            rng=rng,
        )
        for name, figures in timing.items():
            result[name].update(figures)
    for name in steps:
        result[name]["guards"] = guards(case.make(name))
    torch._dynamo.reset()
    return result


def guards(impl: Any) -> int:
    """The guards Dynamo installs on impl's compiled step (its forward: an op's function, or
    the MLP's loss), as `torch._dynamo.explain` counts them: each is evaluated on every call
    of the compiled frame."""
    import torch._dynamo

    fn, args = (impl.fn, impl.args) if hasattr(impl, "fn") else (impl.loss, (impl.x, impl.target))
    torch._dynamo.reset()
    return len(torch._dynamo.explain(fn)(*args).out_guards)
