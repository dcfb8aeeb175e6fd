"""Decorating inside `forward`: a new `@custom_gradient` on every call, as TensorFlow code defines
`@tf.custom_gradient` inside `call` (and `port` translates it), against the same op decorated
once and the hand-written Function. Part of `--bytecodes`: Python instructions per log1pexp
n=100 fwd+bwd step, the decoration included; and of the timed run (`compare`): per case, the
fwd+bwd step decorating a new function of the op's code on every call, against the op decorated
once, interleaved.
"""

from __future__ import annotations

import functools
import random
import sys
import types
from collections.abc import Callable
from typing import Any

import _timing
import torch
from _cases import (
    TF,
    Impl,
    Log1pexpFunction,
    MLPImpl,
    OpImpl,
    clipped_relu,
    log1pexp,
    mul_sub,
    nested,
    scaled,
    sigmoid,
)

from tf_compat_grad import custom_gradient


def decorated_in_forward(x: torch.Tensor) -> torch.Tensor:
    """log1pexp, decorated anew on each call, as a `forward` that defines it does (the function
    decorated once, undecorated: the same code)."""
    return custom_gradient(log1pexp.__wrapped__)(x)


def defined_in_forward(x: torch.Tensor) -> torch.Tensor:
    """log1pexp as a `forward` that defines its custom gradient makes it: a new function of the
    same code (and a new closure) on each call, decorated."""
    return custom_gradient(_fresh(log1pexp))(x)


def _fresh(decorated: Any) -> types.FunctionType:
    """A new function of the code `decorated` decorates, as a `def` inside `forward` makes it."""
    f = decorated.__wrapped__
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)


def _in_forward(decorated: Any, **keywords: Any) -> Callable[..., Any]:
    """The op of `decorated` (called with `keywords`, as the case's own op calls it), defined and
    decorated anew on every call."""

    def op(*args: Any) -> Any:
        return custom_gradient(_fresh(decorated))(*args, **keywords)

    return op


# The cases timed decorated in forward (`compare`), with the op that decorates on every call;
# the MLP's layers each decorate `make_closure_linear` anew (`MLP` form "closure in forward").
IN_FORWARD: dict[str, Callable[..., Any] | None] = {
    "log1pexp_n100": _in_forward(log1pexp),
    "clipped_relu": _in_forward(clipped_relu),
    "two_in_two_out": _in_forward(mul_sub),
    "own_output": _in_forward(sigmoid),
    "keyword": _in_forward(scaled, scale=1.5),
    "nested_outputs": _in_forward(nested),
    "mlp_closure": None,
}
ONCE = "decorated once"


def compare(key: str, once: Impl, **timing: Any) -> dict[str, dict[str, Any]]:
    """The case's fwd+bwd step decorated in forward (`TF`) against the same step decorated once
    (`ONCE`, the reference), timed interleaved (`_timing.compare`)."""
    op = IN_FORWARD[key]
    if op is None:  # the MLP: layers that decorate in forward
        in_forward: Impl = MLPImpl("closure in forward", width=256, depth=3, batch=64, seed=0)
        step = in_forward.step
    else:
        assert isinstance(once, OpImpl)
        step = functools.partial(once.step, op)
    rng: random.Random = timing.pop("rng")
    return _timing.compare({ONCE: once.step, TF: step}, ONCE, rng=rng, **timing)


def _instructions(step: Callable[[], None]) -> int:
    """Python instructions of one step, counted on the third (the first ones fill caches)."""
    count = 0

    def trace(frame: types.FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        frame.f_trace_opcodes = True
        count += event == "opcode"
        return trace

    step()
    step()
    sys.settrace(trace)
    try:
        step()
    finally:
        sys.settrace(None)
    return count


def text() -> str:
    x = torch.randn(100, requires_grad=True)
    upstream = torch.ones(100)

    def stepper(op: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[], None]:
        def step() -> None:
            op(x).backward(upstream)
            x.grad = None

        return step

    impls = {
        "Function": Log1pexpFunction.apply,
        "decorated once": log1pexp,
        "decorated in forward, every call": decorated_in_forward,
        "defined in forward, every call": defined_in_forward,
    }
    counts = {name: _instructions(stepper(op)) for name, op in impls.items()}
    once = counts["decorated once"]
    lines = ["log1pexp n=100, decorated once or in forward (Python instructions per step):"]
    for name, count in counts.items():
        lines.append(f"  {name:40s} {count:6d}  ({count / once:.2f} of decorated once)")
    return "\n".join(lines) + "\n"
