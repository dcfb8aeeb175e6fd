"""How low the decorator's cost can go: log1pexp n=100 fwd+bwd, several ways, interleaved.

- `Function`: the hand-written `autograd.Function`, called as users call it, through
  `Function.apply` (the reference, 1.00).
- `Function, C entry`: the same Function applied through torch's C entry point, as the library
  applies its nodes: what `Function.apply`'s Python wrapper costs the reference itself.
- `layout`: the library's eager layout replayed by hand with no bookkeeping at all: f runs
  before a lean node with grad recording on (Note [where f runs]), its output is handed over
  detached, `e` is saved with its graph, the node applied through the C entry point. What exact
  second derivatives cost by themselves.
- `unrecorded`: the same with grad recording off while f runs (wrong second derivatives): the
  layout's cost less the recording of f's ops.
- `minimal`: a stripped decorator that keeps only what a per-call Python layer cannot skip:
  the mode checks, a plain-tensor argument check, the closure capture and rebuild, input
  metadata and an exact-match check of the gradient. No nested arguments, keyword arguments,
  methods, Parameters (not even the proof that f reads none), autocast, output structures,
  gradient repair or error messages. Written with torch alone: it uses no part of the library.
- `tf_compat_grad`: the library.

`layout` against `unrecorded` is what recording f's ops costs, which exact second derivatives
need and no trimming of the library's Python removes; see "Where the time goes" in benchmarks/README.md.
"""

from __future__ import annotations

import random
import types
from collections.abc import Callable
from typing import Any

import _timing
import torch
from _cases import Log1pexpFunction, log1pexp

Tensor = torch.Tensor


def _f(x: Tensor) -> tuple[Tensor, Callable[[Tensor], Tensor]]:
    e = torch.exp(x)

    def grad(upstream: Tensor) -> Tensor:
        return upstream * (1 - 1 / (1 + e))

    return torch.log(1 + e), grad


class _Layout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, handoff: tuple[Any, ...], x: Tensor) -> Tensor:
        ctx.save_for_backward(*handoff[1])
        return handoff[0]  # type: ignore[no-any-return]

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[None, Tensor]:
        (e,) = ctx.saved_tensors
        return None, dy * (1 - 1 / (1 + e))


# `Function.apply` without its Python wrapper, as the library applies its nodes.
_c_entry = torch._C._FunctionBase.__dict__["apply"]
_layout_apply = _c_entry.__get__(None, _Layout)


def _layout(x: Tensor) -> Tensor:
    e = torch.exp(x)
    y = torch.log(1 + e)
    return _layout_apply((y.detach(), (e,)), x)  # type: ignore[no-any-return]


_set_grad_enabled = torch._C._set_grad_enabled  # the call inside `torch.no_grad()`, without the
# context manager's own Python (about 15k machine instructions, more than what it saves here)


def _unrecorded(x: Tensor) -> Tensor:
    _set_grad_enabled(False)
    try:
        e = torch.exp(x)
        y = torch.log(1 + e)
    finally:
        _set_grad_enabled(True)
    return _layout_apply((y, (e,)), x)  # type: ignore[no-any-return]


class _Handoff:
    __slots__ = ("cells", "code", "globals", "metas", "outputs", "saved")


def _minimal(f: Callable[..., Any]) -> Callable[..., Tensor]:
    """A decorator for flat tensor arguments and one tensor output, and nothing else."""
    grad_enabled = torch.is_grad_enabled
    transforms_active = torch._C._are_functorch_transforms_active
    is_compiling = torch.compiler.is_compiling

    def forward(ctx: Any, handoff: _Handoff, *inputs: Tensor) -> Tensor:
        ctx.save_for_backward(*handoff.saved)
        ctx.handoff = handoff
        outputs = handoff.outputs
        handoff.saved = handoff.outputs = None  # type: ignore[assignment]
        return outputs

    def backward(ctx: Any, *upstream: Tensor) -> tuple[Tensor | None, ...]:
        handoff: _Handoff = ctx.handoff
        saved = ctx.saved_tensors
        cells = tuple(types.CellType(saved[c]) if type(c) is int else c for c in handoff.cells)
        grad = types.FunctionType(handoff.code, handoff.globals, None, None, cells)(*upstream)
        shape, dtype, device = handoff.metas[0]
        exact = type(grad) is Tensor and grad.dtype is dtype and grad.shape == shape
        if exact and grad.device == device:
            return None, grad
        raise NotImplementedError("outside what the minimal decorator handles")

    node = type(
        "minimal", (torch.autograd.Function,), {"forward": staticmethod(forward),
                                                "backward": staticmethod(backward)}
    )  # fmt: skip
    apply = _c_entry.__get__(None, node)
    is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor

    def call(*args: Tensor) -> Tensor:
        if not grad_enabled() or transforms_active() or is_compiling():
            raise NotImplementedError("outside what the minimal decorator handles")
        for arg in args:
            if type(arg) is not Tensor or arg.is_nested or is_wrapped(arg):
                raise NotImplementedError("outside what the minimal decorator handles")
        result, grad_fn = f(*args)
        handoff = _Handoff()
        handoff.metas = [(a.shape, a.dtype, a.device) for a in args]
        handoff.saved, handoff.cells = [], []
        for cell in grad_fn.__closure__:
            value = cell.cell_contents
            if type(value) is Tensor:
                handoff.cells.append(len(handoff.saved))
                handoff.saved.append(value)
            else:
                handoff.cells.append(cell)
        handoff.code, handoff.globals = grad_fn.__code__, grad_fn.__globals__
        handoff.outputs = result.detach()
        return apply(handoff, *args)  # type: ignore[no-any-return]

    return call


def floor(repetitions: int = 101, block_seconds: float = 0.01, seed: int = 0) -> str:
    torch.manual_seed(seed)
    x = torch.randn(100, requires_grad=True)
    upstream = torch.ones(100)
    impls = {
        "Function": Log1pexpFunction.apply,
        "Function, C entry": _c_entry.__get__(None, Log1pexpFunction),
        "layout": _layout,
        "unrecorded": _unrecorded,
        "minimal": _minimal(_f),
        "tf_compat_grad": log1pexp,
    }
    expected = None
    for name, fn in impls.items():  # the same gradient from each, or the timing means nothing
        fn(x).backward(upstream)
        assert x.grad is not None
        if expected is None:
            expected = x.grad.clone()
        torch.testing.assert_close(x.grad, expected, msg=name)
        x.grad = None

    def step(fn: Callable[[Tensor], Tensor]) -> Callable[[], None]:
        def run() -> None:
            fn(x).backward(upstream)
            x.grad = None

        return run

    result = _timing.compare(
        {name: step(fn) for name, fn in impls.items()},
        "Function",
        repetitions=repetitions,
        block_seconds=block_seconds,
        rng=random.Random(seed),
    )
    lines = [
        f"log1pexp n=100 fwd+bwd, {torch.get_num_threads()} thread(s), {_timing.CLOCK_NAME} "
        f"time, median of {repetitions} interleaved repetitions (q1-q3 in brackets)",
    ]
    for name, figures in result.items():
        lines.append(
            f"{name:18s} {figures['seconds_per_call'] * 1e6:6.1f} us  ratio "
            f"{figures['ratio']:.3f} ({figures['ratio_q1']:.3f}-{figures['ratio_q3']:.3f})"
        )
    return "\n".join(lines)
