"""Decorating inside `forward`: a new `@custom_gradient` on every call, as TensorFlow code defines
`@tf.custom_gradient` inside `call` (and `port` translates it), against the same op decorated
once and the hand-written Function. Part of `--bytecodes`: Python instructions per log1pexp
n=100 fwd+bwd step, the decoration included.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

import torch
from _cases import Log1pexpFunction, log1pexp

from tf_compat_grad import custom_gradient


def decorated_in_forward(x: torch.Tensor) -> torch.Tensor:
    """log1pexp, decorated anew on each call, as a `forward` that defines it does (the function
    decorated once, undecorated: the same code)."""
    return custom_gradient(log1pexp.__wrapped__)(x)


def defined_in_forward(x: torch.Tensor) -> torch.Tensor:
    """log1pexp as a `forward` that defines its custom gradient makes it: a new function of the
    same code (and a new closure) on each call, decorated."""
    f = log1pexp.__wrapped__
    fresh = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    return custom_gradient(fresh)(x)


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
