"""The individual checks behind `tf_compat_grad.testing.check`.

Each check takes a `_Subject` (the function, its example, what the forward found) and returns a
`Row`. Every check makes its own fresh copies of the example inputs, so no check sees another's
gradients or in-place edits, and runs with the random-number state forked and seeded, so a random
f draws the same numbers each time and the caller's state is left alone.

# Note [statuses]
FAIL is kept for what breaks plain training or is silently wrong: an error in eager mode or
under autocast or `no_grad`, a wrong gradient count, NaN where the reference is finite, results
that change between two backward passes or under a transform, a stale gradient after an in-place
edit, a leak. A transform or `fullgraph=True` that *refuses* the function with an error is a
WARN: it is loud, optional, and the reason says what to change. A gradient that differs from
the true derivative is a WARN too (straight-through estimators and clipping differ on purpose),
and so is a grad_fn that is not linear in the upstream, and an example point on a kink or jump
where finite differences are no derivative (Note [kinks]): the rest is still compared there.
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import logging
import math
import os
import time
import types
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import _gradients, _run, _structure
from ._decorator import CustomGradient
from ._torch_internals import COMPILE_SUPPORT, DYNAMO_TRACES_WATCHER
from ._variables import ParameterWatcher
from .testing import CHECKS, Example, Report, Row, Status

_Tensor = torch.Tensor
F64 = torch.float64

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP

EPS = 1e-6  # central finite differences in float64
MAX_ELEMENTS = 64  # more input elements than this: finite differences along random directions
DIRECTIONS = 12
BATCH = 3  # vmap batch size
KINK_RTOL = 1e-3  # one-sided differences further apart: a kink or jump (Note [kinks])
LINEAR_A, LINEAR_B = 2.0, -0.5  # a + b != 1, so a grad_fn that sets constants shows up

# The checks that need a gradient: skipped when the forward or `gradients` fails.
_NEEDS_GRADIENT = (
    "numerical",
    "autodiff",
    "linearity",
    "determinism",
    "second_order",
    "func_grad",
    "vmap",
    "compile",
    "autocast",
    "inplace",
    "memory",
)


# --- the function under check -------------------------------------------------------------


class _Inputs:
    """Fresh copies of the example arguments; the floating-point positional leaves (and the
    Parameters f reads) are the leaves gradients are taken for."""

    def __init__(self, subject: _Subject, dtype: torch.dtype | None, grad: bool = True) -> None:
        self.subject = subject
        leaves = [
            _copy(leaf, dtype, grad and i in subject.float_positions)
            for i, leaf in enumerate(subject.leaves)
        ]
        self.leaves = leaves
        self.kwargs = _structure.unflatten(
            subject.kwarg_spec, [_copy(v, dtype, False) for v in subject.kwarg_leaves]
        )
        self.inputs: list[_Tensor] = [leaves[i] for i in subject.float_positions]
        self.targets: list[_Tensor] = [*self.inputs, *subject.variables]
        self.tensors: list[_Tensor] = [leaves[i] for i in subject.tensor_positions]

    @property
    def args(self) -> tuple[Any, ...]:
        return self.subject.args_from(self.leaves)

    def call(self) -> Any:
        return self.subject.fn(*self.args, **self.kwargs)

    def call_with(self, tensors: Sequence[_Tensor]) -> Any:
        """Call with the positional tensor leaves replaced by `tensors` (for transforms)."""
        leaves = list(self.leaves)
        for position, tensor in zip(self.subject.tensor_positions, tensors, strict=True):
            leaves[position] = tensor
        return self.subject.fn(*self.subject.args_from(leaves), **self.kwargs)


def _copy(value: Any, dtype: torch.dtype | None, grad: bool) -> Any:
    if not isinstance(value, _Tensor):
        return value
    copy = value.detach().clone(memory_format=torch.contiguous_format)
    if dtype is not None and copy.is_floating_point():
        copy = copy.to(dtype)
    return copy.requires_grad_(grad)


class _Subject:
    """The function under check with its example, and what the forward found out."""

    def __init__(self, fn: Callable[..., Any], example: Example) -> None:
        self.fn = fn
        self.example = example
        self.cg, self.prefix, self.self_arg = _unwrap(fn)
        positional = example.args[1:] if self.self_arg else example.args
        self.leaves, self.spec = _structure.flatten(tuple(positional))
        self.kwarg_leaves, self.kwarg_spec = _structure.flatten(dict(example.kwargs))
        self.tensor_positions = [i for i, x in enumerate(self.leaves) if isinstance(x, _Tensor)]
        self.float_positions = [
            i for i in self.tensor_positions if self.leaves[i].is_floating_point()
        ]
        self.variables: list[torch.nn.Parameter] = []  # found by the forward check
        self.float_outputs = 0
        self.true_gradient: bool | None = None  # set by the numerical check
        self.names = self._names()

    @property
    def bound(self) -> Any:
        if self.prefix:
            return self.prefix[0]
        return self.example.args[0] if self.self_arg else _run.UNBOUND

    def args_from(self, leaves: Sequence[Any]) -> tuple[Any, ...]:
        positional = tuple(_structure.unflatten(self.spec, leaves))
        return (self.example.args[0], *positional) if self.self_arg else positional

    def _names(self) -> list[str]:
        target = self.cg._f if self.cg is not None else self.fn
        bound = self.cg is not None and (bool(self.prefix) or self.self_arg)
        try:
            top = _run.positional_names(target, bound)
        except TypeError:  # unhashable callable
            top = ()
        if self.cg is None and self.self_arg:
            top = top[1:]
        return _structure.leaf_paths(self.spec, top)

    def target_name(self, i: int) -> str:
        if i < len(self.float_positions):
            return self.names[self.float_positions[i]] or "x"
        return f"variables[{i - len(self.float_positions)}]"

    def element(self, i: int, k: int, shape: torch.Size) -> str:
        name = self.target_name(i)
        if len(shape) == 0:
            return f"`{name}`"
        return f"`{name}[{', '.join(str(j) for j in _unravel(k, shape))}]`"

    def modules(self) -> list[torch.nn.Module]:
        candidates = [self.bound, *self.kwarg_leaves, getattr(self.fn, "__self__", None)]
        return [m for m in candidates if isinstance(m, torch.nn.Module)]

    @contextlib.contextmanager
    def cast(self, dtype: torch.dtype) -> Iterator[None]:
        """The Parameters and buffers f reads cast to `dtype` for the duration (restored)."""
        tensors: dict[int, _Tensor] = {id(v): v for v in self.variables}
        for module in self.modules():
            tensors.update((id(t), t) for t in module.parameters())
            tensors.update((id(t), t) for t in module.buffers())
        changed: list[tuple[_Tensor, _Tensor]] = []
        try:
            for t in tensors.values():
                if t.is_floating_point() and t.dtype != dtype:
                    changed.append((t, t.data))
                    t.data = t.data.to(dtype)
            yield
        finally:
            for t, data in reversed(changed):
                t.data = data


def _unwrap(
    fn: Callable[..., Any],
) -> tuple[CustomGradient[Any, Any] | None, tuple[Any, ...], bool]:
    """The `CustomGradient` behind `fn`, the bound instance, and whether `fn` is a method
    taken from its class (its first argument is then the instance)."""
    if isinstance(fn, CustomGradient):
        return fn, (), False
    if isinstance(fn, types.MethodType):
        cg = getattr(fn.__func__, "__tf_compat_grad__", None)
        if isinstance(cg, CustomGradient):
            return cg, (fn.__self__,), False
        return None, (), False
    cg = getattr(fn, "__tf_compat_grad__", None)
    if isinstance(cg, CustomGradient):
        return cg, (), True
    return None, (), False


def _unravel(k: int, shape: Sequence[int]) -> tuple[int, ...]:
    index: list[int] = []
    for size in reversed(shape):
        index.append(k % size)
        k //= size
    return tuple(reversed(index))


# --- small helpers ------------------------------------------------------------------------


def _float_outputs(out: Any) -> list[_Tensor]:
    return [o for o in _structure.leaves(out) if isinstance(o, _Tensor) and o.is_floating_point()]


def _upstreams(outputs: Sequence[_Tensor], seed: int) -> list[_Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(o.shape, generator=generator, dtype=F64).to(device=o.device, dtype=o.dtype)
        for o in outputs
    ]


def _like(targets: Sequence[_Tensor], seed: int) -> list[_Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(t.shape, generator=generator, dtype=F64).to(device=t.device, dtype=t.dtype)
        for t in targets
    ]


def _vjp(
    outputs: Sequence[_Tensor],
    upstreams: Sequence[_Tensor],
    targets: Sequence[_Tensor],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
) -> list[_Tensor]:
    """The gradient of `sum <output, upstream>` for each target; zeros where none flows."""
    pairs = [(o, u) for o, u in zip(outputs, upstreams, strict=True) if o.requires_grad]
    if not pairs or not targets:
        return [torch.zeros_like(t) for t in targets]
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        list(targets),
        [u for _, u in pairs],
        allow_unused=True,
        materialize_grads=True,
        create_graph=create_graph,
        retain_graph=retain_graph,
    )
    return list(grads)


def _dot(outputs: Sequence[_Tensor], upstreams: Sequence[_Tensor]) -> _Tensor:
    total = torch.zeros((), dtype=F64)
    for o, u in zip(outputs, upstreams, strict=True):
        total = total + (o.to(F64) * u.to(F64)).sum()
    return total


class _Diff:
    """The largest difference between two lists of tensors, where both are finite; and where
    one is finite and the other is not."""

    def __init__(self, got: Sequence[_Tensor], want: Sequence[_Tensor]) -> None:
        self.max = 0.0
        self.scale = 0.0
        self.at: tuple[int, int] | None = None
        self.got_value = self.want_value = 0.0
        self.count = 0  # elements beyond the tolerance, set by `within`
        self.bad_got: tuple[int, int, float, float] | None = None  # non-finite got, finite want
        self.n_bad_got = 0
        self.n_bad_want = 0  # non-finite want, finite got
        self._pairs = [
            (g.detach().to(F64).reshape(-1), w.detach().to(F64).reshape(-1))
            for g, w in zip(got, want, strict=True)
        ]
        for i, (g, w) in enumerate(self._pairs):
            fg, fw = torch.isfinite(g), torch.isfinite(w)
            bad = fw & ~fg
            if bad.any():
                self.n_bad_got += int(bad.sum())
                if self.bad_got is None:
                    k = int(bad.nonzero()[0])
                    self.bad_got = (i, k, float(g[k]), float(w[k]))
            self.n_bad_want += int((fg & ~fw).sum())
            both = fg & fw
            if both.any():
                self.scale = max(self.scale, float(w[both].abs().max()))
                d = torch.where(both, (g - w).abs(), torch.zeros_like(g))
                k = int(d.argmax())
                if self.at is None or float(d[k]) > self.max:
                    self.max, self.at = float(d[k]), (i, k)
                    self.got_value, self.want_value = float(g[k]), float(w[k])

    def within(self, rtol: float, atol: float) -> bool:
        tol = atol + rtol * self.scale
        self.count = sum(
            int(((g - w).abs() > tol)[torch.isfinite(g) & torch.isfinite(w)].sum())
            for g, w in self._pairs
        )
        return self.max <= tol

    def differs(self, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """NaN or infinity on one side only, or values outside the tolerance."""
        return bool(self.n_bad_got or self.n_bad_want) or not self.within(rtol, atol)

    @property
    def relative(self) -> float:
        return self.max / max(1.0, self.scale)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    if len(message) > 300:
        message = message[:297] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _fmt(value: float) -> str:
    return f"{value:.2g}" if value != 0 else "0"


def _bytes(n: int) -> str:
    return f"{n} bytes" if n < 10_000 else f"{n / 1e6:.1f} MB"


@contextlib.contextmanager
def _seeded(seed: int = 0) -> Iterator[None]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def _quiet_compiler_logs() -> Iterator[None]:
    """Dynamo logs graph breaks as warnings on stderr; the compile check reports them."""
    loggers = [logging.getLogger(name) for name in ("torch._dynamo", "torch._inductor", "torch.fx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# --- finite differences -------------------------------------------------------------------


class _Numerical:
    """Finite differences of a scalar function of the targets, against its analytic gradient.

    Up to MAX_ELEMENTS elements, one derivative per element; beyond, the directional
    derivative along DIRECTIONS random directions (compared with `<analytic, direction>`).
    Elements where finite differences are no derivative are set apart (Note [kinks]).

    # Note [kinks]
    A central difference across a kink (relu at 0) or a jump (a piecewise gradient at its
    boundary, in the second-order check) is no derivative: relu's is 0.5 at 0, and a jump gives
    jump / (2 EPS). So the one-sided differences are taken too, `(f(x+h) - f(x)) / h` and
    `(f(x) - f(x-h)) / h`, from the same evaluations plus one at x. On a smooth stretch they
    differ by about `h |f''|`, a millionth of the curvature; across a kink by the change of
    slope, across a jump by the jump over h. Where they differ by more than KINK_RTOL of the
    larger slope and of the analytic scale (at least 1), plus the rounding error, the element
    is on a kink: its value is not compared (a non-finite analytic value still is, NaN being
    wrong on either side), and the checks name it. A smooth element looks like a kink only
    where |f''| exceeds about 1000 times its slope and the analytic scale, so a wrong rule is
    still caught at every smooth element.
    """

    def __init__(
        self,
        evaluate: Callable[[], float],
        targets: Sequence[_Tensor],
        analytic: Sequence[_Tensor],
    ) -> None:
        self.per_element = sum(t.numel() for t in targets) <= MAX_ELEMENTS
        saved = [t.detach().clone() for t in targets]
        self.values = [t.to(F64).reshape(-1) for t in saved]
        try:
            at = evaluate()
            if self.per_element:
                self.shapes = [t.shape for t in targets]
                sides = [self._per_element(evaluate, t) for t in targets]
                self.analytic = [a.detach().to(F64).reshape(-1) for a in analytic]
            else:
                directions = [_like(targets, 100 + d) for d in range(DIRECTIONS)]
                self.shapes = [torch.Size([DIRECTIONS])]
                sides = [
                    torch.tensor([self._along(evaluate, targets, saved, d) for d in directions]).T
                ]
                self.analytic = [
                    torch.tensor(
                        [
                            sum(
                                float((a.to(F64) * v.to(F64)).sum())
                                for a, v in zip(analytic, d, strict=True)
                            )
                            for d in directions
                        ],
                        dtype=F64,
                    )
                ]
        finally:
            with torch.no_grad():
                for t, s in zip(targets, saved, strict=True):
                    t.copy_(s)
        finite = [a[torch.isfinite(a)].abs() for a in self.analytic]
        scale = max([1.0, *(float(a.max()) for a in finite if a.numel())])
        self.numerical, self.left, self.right, self.kinked = [], [], [], []
        for plus, minus in sides:
            right, left = (plus - at) / EPS, (at - minus) / EPS
            size = plus.abs().maximum(minus.abs()).clamp(min=abs(at))
            rounding = 4 * torch.finfo(F64).eps * size / EPS
            tolerance = KINK_RTOL * (right.abs().maximum(left.abs()) + scale) + rounding
            self.numerical.append((plus - minus) / (2 * EPS))
            self.left.append(left)
            self.right.append(right)
            self.kinked.append((right - left).abs() > tolerance)  # False where either is NaN

    @staticmethod
    def _per_element(evaluate: Callable[[], float], t: _Tensor) -> _Tensor:
        """f at `t` moved by +EPS and by -EPS, one element at a time: shape (2, t.numel())."""
        out = torch.zeros((2, t.numel()), dtype=F64)
        for k in range(t.numel()):
            index = _unravel(k, t.shape)
            with torch.no_grad():
                original = t[index].item()
            for row, step in enumerate((EPS, -EPS)):
                with torch.no_grad():
                    t[index] = original + step
                out[row, k] = evaluate()
            with torch.no_grad():
                t[index] = original
        return out

    @staticmethod
    def _along(
        evaluate: Callable[[], float],
        targets: Sequence[_Tensor],
        saved: Sequence[_Tensor],
        direction: Sequence[_Tensor],
    ) -> tuple[float, float]:
        values = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for t, s, d in zip(targets, saved, direction, strict=True):
                    t.copy_(s + sign * EPS * d)
            values.append(evaluate())
        return values[0], values[1]

    def compared(self) -> tuple[list[_Tensor], list[_Tensor]]:
        """The analytic and numerical values to compare: on a kink, the numerical value is
        replaced by the analytic one where that is finite (Note [kinks])."""
        numerical = [
            torch.where(kinked & torch.isfinite(a), a, n)
            for a, n, kinked in zip(self.analytic, self.numerical, self.kinked, strict=True)
        ]
        return self.analytic, numerical

    @property
    def unit(self) -> str:
        return "element(s)" if self.per_element else "random direction(s)"

    @property
    def on_kinks(self) -> int:
        return sum(int(k.sum()) for k in self.kinked)

    @property
    def compared_count(self) -> int:
        return sum(int(k.numel()) for k in self.kinked) - self.on_kinks

    def kinks(self, subject: _Subject) -> str:
        """The elements on a kink or jump, named with their values and one-sided differences;
        empty when there is none."""
        n = self.on_kinks
        if not n:
            return ""
        found = [(i, int(k)) for i, mask in enumerate(self.kinked) for k in mask.nonzero()]
        shown = []
        for i, k in found[:3]:
            value = f" = {float(self.values[i][k]):.4g}" if self.per_element else ""
            shown.append(
                f"{self.where(subject, i, k)}{value} (left {float(self.left[i][k]):.4g}, "
                f"right {float(self.right[i][k]):.4g})"
            )
        more = f" and {n - len(shown)} more" if n > len(shown) else ""
        total = sum(k.numel() for k in self.kinked)
        return (
            f"not checkable at {n} of {total} {self.unit} on a kink or jump, where the one-sided "
            f"differences disagree: {'; '.join(shown)}{more}"
        )

    def where(self, subject: _Subject, i: int, k: int) -> str:
        if self.per_element:
            return subject.element(i, k, self.shapes[i])
        return f"random direction {k}"


# --- the checks ---------------------------------------------------------------------------


def _check_forward(s: _Subject) -> Row:
    inputs = _Inputs(s, None)
    versions = [t._version for t in inputs.tensors]
    watcher = ParameterWatcher()
    with watcher:
        out = inputs.call()
    edited = [
        s.names[p] or "x"
        for p, t, v in zip(s.tensor_positions, inputs.tensors, versions, strict=True)
        if t._version != v
    ]
    if edited:
        return Row(
            "forward",
            FAIL,
            f"f edits its argument {', '.join(f'`{n}`' for n in edited)} in place: the caller's "
            "tensor changes and autograd does not see the edit. Compute on a copy "
            "(`x = x.clone()`, or out-of-place ops)",
        )
    exclude = [*s.leaves, *s.kwarg_leaves, *inputs.leaves, *_structure.leaves(inputs.kwargs)]
    s.variables = watcher.variables(exclude=exclude)
    leaves = _structure.leaves(out)
    tensors = [o for o in leaves if isinstance(o, _Tensor)]
    if not tensors:
        return Row("forward", FAIL, f"returned no tensor (got {type(out).__name__})")
    s.float_outputs = len(_float_outputs(out))
    shapes = ", ".join(f"{list(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in tensors)
    others = len(leaves) - len(tensors)
    extra = f" and {others} non-tensor output(s)" if others else ""
    variables = (
        f"; reads {len(s.variables)} Parameter(s) it is not passed (`variables=`)"
        if s.variables
        else ""
    )
    return Row(
        "forward",
        PASS,
        f"runs; outputs {shapes}{extra}{variables}",
        f"{len(tensors)} output(s)",
        len(tensors),
    )


def _gradient_skip(s: _Subject, check: str) -> Row | None:
    if not s.float_positions and not s.variables:
        return Row(check, SKIP, "no floating-point tensor input to differentiate")
    if not s.float_outputs:
        return Row(check, SKIP, "no floating-point output to differentiate")
    return None


def _check_gradients(s: _Subject) -> Row:
    inputs = _Inputs(s, None)
    outputs = _float_outputs(inputs.call())
    if not any(o.requires_grad for o in outputs):
        return Row(
            "gradients",
            FAIL,
            "no output requires grad although the inputs do: no gradient "
            "reaches the inputs (is the output detached, or computed under no_grad?)",
        )
    upstreams = _upstreams(outputs, 0)
    pairs = [(o, u) for o, u in zip(outputs, upstreams, strict=True) if o.requires_grad]
    try:
        grads = torch.autograd.grad(
            [o for o, _ in pairs], inputs.targets, [u for _, u in pairs], allow_unused=True
        )
    except Exception as error:
        return Row("gradients", FAIL, f"backward raises {_first_line(error)}")
    for i, (g, t) in enumerate(zip(grads, inputs.targets, strict=True)):
        if g is not None and (g.shape != t.shape or g.dtype != t.dtype):
            return Row(
                "gradients",
                FAIL,
                f"the gradient for `{s.target_name(i)}` has shape "
                f"{list(g.shape)} and dtype {g.dtype}; the input has {list(t.shape)}, {t.dtype}",
            )
    n = len(s.leaves)
    notes = _raw_gradient_notes(s) if s.cg is not None else []
    if notes:
        return Row("gradients", WARN, "; ".join(notes), f"{n} positional input(s)", n)
    missing = [s.target_name(i) for i, g in enumerate(grads) if g is None]
    none = f"; no gradient (None) for {', '.join(f'`{m}`' for m in missing)}" if missing else ""
    reason = f"one gradient per positional input ({n}), shapes and dtypes match{none}"
    return Row("gradients", PASS, reason, f"{n} positional input(s)", n)


def _raw_gradient_notes(s: _Subject) -> list[str]:
    """What grad_fn itself returns, before tf_compat_grad repairs it: shapes and dtypes that
    torch would not accept and that the library expands, sums down or casts."""
    assert s.cg is not None
    f = s.cg._f
    inputs = _Inputs(s, None)
    positional = inputs.args[1:] if s.self_arg else inputs.args
    flat_args, *_ = _run.inputs(f, s.bound, positional)
    with torch.enable_grad():
        result, grad_fn, variables = _run.run(f, s.bound, positional, inputs.kwargs, flat_args)
    outputs, _ = _run.outputs(f, result)
    upstreams = [
        u if o.is_floating_point() else torch.zeros_like(o)
        for o, u in zip(outputs, _upstreams(outputs, 0), strict=True)
    ]
    with torch.no_grad():
        returned = (
            grad_fn(*upstreams, variables=list(variables)) if variables else grad_fn(*upstreams)
        )
    variable_grads: Sequence[Any] = ()
    if variables:
        returned, variable_grads = _gradients.split_variable_grads(returned, variables, f)
    flat = _structure.leaves(returned)
    if len(flat) != len(flat_args):
        raise _gradients.count_error(len(flat), len(flat_args), f, ", ".join(s.names))
    notes: list[str] = []
    pairs = [(s.names[i] or "x", flat[i], flat_args[i]) for i in s.float_positions]
    pairs += [
        (f"variables[{j}]", g, v)
        for j, (g, v) in enumerate(zip(variable_grads, variables, strict=True))
    ]
    for name, g, x in pairs:
        if not isinstance(g, _Tensor):
            continue
        if g.shape != x.shape:
            how = (
                "expanded"
                if torch.Size(torch.broadcast_shapes(g.shape, x.shape)) == x.shape  # type: ignore[no-untyped-call]
                else "summed down"
            )
            notes.append(
                f"grad_fn returns shape {list(g.shape)} for `{name}` of shape {list(x.shape)} "
                f"({how} by tf_compat_grad; is that intended?)"
            )
        if g.dtype != x.dtype:
            notes.append(f"grad_fn returns {g.dtype} for `{name}` of dtype {x.dtype} (cast)")
    return notes


def _forward_f64(s: _Subject) -> tuple[_Inputs, list[torch.Tensor], list[torch.Tensor]]:
    """Fresh float64 inputs, the float outputs of one call on them, and upstreams drawn for
    them (seed 0)."""
    inputs = _Inputs(s, F64)
    outputs = _float_outputs(inputs.call())
    return inputs, outputs, _upstreams(outputs, 0)


def _check_numerical(s: _Subject) -> Row:
    with s.cast(F64):
        inputs, outputs, upstreams = _forward_f64(s)
        custom = _vjp(outputs, upstreams, inputs.targets)

        def evaluate() -> float:
            with torch.no_grad():
                return float(_dot(_float_outputs(inputs.call()), upstreams))

        numerical = _Numerical(evaluate, inputs.targets, custom)
    diff = _Diff(*numerical.compared())
    how = (
        "finite differences"
        if numerical.per_element
        else f"finite differences along {DIRECTIONS} random directions"
    )
    figure = f"max |custom - numerical| {_fmt(diff.max)}"
    kinks = numerical.kinks(s)
    s.true_gradient = None if kinks else False
    if diff.bad_got is not None:
        i, k, got, want = diff.bad_got
        return Row(
            "numerical",
            FAIL,
            f"the custom gradient is {got} at {numerical.where(s, i, k)} where "
            f"the numerical derivative is finite ({want:.4g}); {diff.n_bad_got} such element(s)",
            figure,
            diff.max,
        )
    undefined = f"; {how} undefined at {diff.n_bad_want} element(s)" if diff.n_bad_want else ""
    if not numerical.compared_count:
        return Row("numerical", WARN, _nothing_compared(kinks, "the gradient"), figure, diff.max)
    if diff.within(rtol=1e-5, atol=1e-6):
        if kinks:
            return Row(
                "numerical",
                WARN,
                f"matches the true derivative ({how}) at the other "
                f"{numerical.compared_count} {numerical.unit}; {kinks}{undefined}",
                figure,
                diff.max,
            )
        s.true_gradient = True
        return Row(
            "numerical", PASS, f"matches the true derivative ({how}){undefined}", figure, diff.max
        )
    assert diff.at is not None
    where = numerical.where(s, *diff.at)
    return Row(
        "numerical",
        WARN,
        f"deliberately differs from the true derivative at {diff.count} "
        f"element(s): largest at {where} (custom {diff.got_value:.4g}, numerical "
        f"{diff.want_value:.4g}){undefined}{f'; {kinks}' if kinks else ''}",
        figure,
        diff.max,
    )


def _nothing_compared(kinks: str, what: str) -> str:
    return f"nothing compared: {kinks}. Give example inputs away from the kinks to check {what}"


def _check_autodiff(s: _Subject) -> Row:
    if s.cg is None:
        return Row("autodiff", SKIP, "not a custom_gradient function: nothing to compare with")
    f = s.cg._f
    with s.cast(F64):
        inputs, outputs, upstreams = _forward_f64(s)
        custom = _vjp(outputs, upstreams, inputs.targets)
        raw = _Inputs(s, F64)
        positional = raw.args[1:] if s.self_arg else raw.args
        with torch.enable_grad():
            result, _ = _run.split(f, _run.call_f(f, s.bound, positional, raw.kwargs))
        raw_outputs = [
            o for o in _structure.leaves(result) if isinstance(o, _Tensor) and o.is_floating_point()
        ]
        if len(raw_outputs) != len(outputs) or not any(o.requires_grad for o in raw_outputs):
            return Row(
                "autodiff",
                SKIP,
                "f's own ops do not reach its outputs differentiably "
                "(round, detach, integer ops, no_grad): only finite differences apply",
            )
        try:
            auto = _vjp(raw_outputs, upstreams, raw.targets)
        except RuntimeError as error:
            return Row(
                "autodiff", SKIP, f"f's own ops are not differentiable: {_first_line(error)}"
            )
    diff = _Diff(custom, auto)
    figure = f"max |custom - autodiff| {_fmt(diff.max)}"
    if diff.bad_got is not None:
        i, k, got, want = diff.bad_got
        return Row(
            "autodiff",
            FAIL,
            f"the custom gradient is {got} at {s.element(i, k, custom[i].shape)} "
            f"where autodiff of f gives {want:.4g}; {diff.n_bad_got} such element(s)",
            figure,
            diff.max,
        )
    stable = (
        f"; finite at {diff.n_bad_want} element(s) where autodiff of f gives nan/inf"
        if diff.n_bad_want
        else ""
    )
    if diff.within(rtol=1e-6, atol=1e-9):
        return Row("autodiff", PASS, f"matches autodiff of f's own ops{stable}", figure, diff.max)
    assert diff.at is not None
    where = s.element(diff.at[0], diff.at[1], custom[diff.at[0]].shape)
    return Row(
        "autodiff",
        WARN,
        f"deliberately differs from autodiff of f at {diff.count} element(s): "
        f"largest at {where} (custom {diff.got_value:.4g}, autodiff {diff.want_value:.4g}){stable}",
        figure,
        diff.max,
    )


def _check_linearity(s: _Subject) -> Row:
    a, b = LINEAR_A, LINEAR_B
    with s.cast(F64):
        inputs = _Inputs(s, F64)
        outputs = _float_outputs(inputs.call())
        u, v = _upstreams(outputs, 1), _upstreams(outputs, 2)
        mixed = [a * ui + b * vi for ui, vi in zip(u, v, strict=True)]
        zero = [torch.zeros_like(ui) for ui in u]
        targets = inputs.targets
        gu, gv, gm, g0 = (
            _vjp(outputs, up, targets, retain_graph=True) for up in (u, v, mixed, zero)
        )
    expected = [a * x + b * y for x, y in zip(gu, gv, strict=True)]
    zeros = [torch.zeros_like(g) for g in g0]
    at_zero = _Diff(g0, zeros)
    mix = _Diff(gm, expected)
    figure = f"max deviation {_fmt(max(mix.max, at_zero.max))}"
    if at_zero.bad_got is not None:
        i, k, got, _ = at_zero.bad_got
        return Row(
            "linearity",
            FAIL,
            f"grad_fn gives {got} at {s.element(i, k, g0[i].shape)} for a zero "
            "upstream gradient; an output the loss does not use gets a zero upstream, so this "
            "puts nan/inf into the gradients",
            figure,
            math.inf,
        )
    if mix.bad_got is not None:
        i, k, got, _ = mix.bad_got
        return Row(
            "linearity",
            FAIL,
            f"grad_fn({a:g}u {b:+g}v) is {got} at {s.element(i, k, gm[i].shape)} "
            f"where {a:g} grad_fn(u) {b:+g} grad_fn(v) is finite",
            figure,
            math.inf,
        )
    scale = max(1.0, mix.scale, max((float(g.abs().max()) for g in gu if g.numel()), default=0.0))
    deviation = max(mix.max, at_zero.max)
    if deviation <= 1e-9 * scale:
        return Row(
            "linearity",
            PASS,
            f"linear in the upstream: grad_fn({a:g}u {b:+g}v) = {a:g} grad_fn(u) "
            f"{b:+g} grad_fn(v), and grad_fn(0) = 0",
            figure,
            deviation,
        )
    if mix.max >= at_zero.max:
        assert mix.at is not None
        where = s.element(mix.at[0], mix.at[1], gm[mix.at[0]].shape)
        what = (
            f"grad_fn({a:g}u {b:+g}v) is {mix.got_value:.4g} at {where}, not {a:g} grad_fn(u) "
            f"{b:+g} grad_fn(v) = {mix.want_value:.4g}"
        )
    else:
        assert at_zero.at is not None
        where = s.element(at_zero.at[0], at_zero.at[1], g0[at_zero.at[0]].shape)
        what = f"grad_fn(0) is {at_zero.got_value:.4g} at {where}, not 0"
    return Row(
        "linearity",
        WARN,
        f"not linear in the upstream gradient ({what}): loss scaling (AMP's "
        "GradScaler), gradient accumulation and mean-vs-sum losses will change its gradients; "
        "if not intended, make every value it returns proportional to the upstream "
        "(`-0.5 * dy`, not `-0.5`)",
        figure,
        deviation,
    )


def _check_determinism(s: _Subject) -> Row:
    with s.cast(F64):
        with _seeded(7):
            inputs, outputs, upstreams = _forward_f64(s)
            first = _vjp(outputs, upstreams, inputs.targets, retain_graph=True)
            try:
                second = _vjp(outputs, upstreams, inputs.targets)
            except RuntimeError as error:
                return Row(
                    "determinism", FAIL, f"a second backward pass raises {_first_line(error)}"
                )
        with _seeded(7):
            again = _Inputs(s, F64)
            third = _vjp(_float_outputs(again.call()), upstreams, again.targets)
    same_graph = _Diff(second, first)
    fresh = _Diff(third, first)
    figure = f"max difference {_fmt(max(same_graph.max, fresh.max))}"
    for diff, what in (
        (same_graph, "two backward passes through one forward"),
        (fresh, "a second forward and backward with the same inputs and random seed"),
    ):
        nan_mismatch = diff.n_bad_got or diff.n_bad_want
        if nan_mismatch or not diff.within(rtol=1e-12, atol=1e-12):
            where = ""
            if diff.at is not None and not nan_mismatch:
                i, k = diff.at
                where = f" at {s.element(i, k, first[i].shape)} ({diff.want_value:.6g} then {diff.got_value:.6g})"
            return Row(
                "determinism",
                FAIL,
                f"{what} give different gradients{where}: grad_fn depends on "
                "something besides the upstream and what f computed (random numbers, state "
                "changed between calls, an in-place edit of the upstream or of a saved tensor)",
                figure,
                max(diff.max, float(nan_mismatch)),
            )
    return Row(
        "determinism",
        PASS,
        "two backward passes, and a fresh forward with the same seed, give identical gradients",
        figure,
        max(same_graph.max, fresh.max),
    )


def _check_second_order(s: _Subject) -> Row:
    with s.cast(F64):
        inputs = _Inputs(s, F64)
        targets = inputs.targets
        outputs = _float_outputs(inputs.call())
        upstreams = _upstreams(outputs, 0)
        weights = _like(targets, 3)
        try:
            grads = _vjp(outputs, upstreams, targets, create_graph=True)
            total = sum(
                ((g * w).sum() for g, w in zip(grads, weights, strict=True)),
                torch.zeros((), dtype=F64),
            )
            graph = total.requires_grad
            analytic = (
                _vjp([total], [torch.ones((), dtype=F64)], targets)
                if graph
                else [torch.zeros_like(t) for t in targets]
            )
        except Exception as error:
            return Row("second_order", WARN, f"double backward raises {_first_line(error)}")

        def evaluate() -> float:
            with torch.enable_grad():
                g = _vjp(_float_outputs(inputs.call()), upstreams, targets)
            return float(sum(float((gi * wi).sum()) for gi, wi in zip(g, weights, strict=True)))

        numerical = _Numerical(evaluate, targets, analytic)
    diff = _Diff(*numerical.compared())
    figure = f"max |double backward - numerical| {_fmt(diff.max)}"
    kinks = numerical.kinks(s)
    if diff.bad_got is not None:
        i, k, got, want = diff.bad_got
        return Row(
            "second_order",
            FAIL,
            f"double backward gives {got} at {numerical.where(s, i, k)} "
            f"where the gradient's finite differences give {want:.4g}",
            figure,
            diff.max,
        )
    if not numerical.compared_count:
        return Row(
            "second_order",
            WARN,
            _nothing_compared(kinks, "the second derivative"),
            figure,
            diff.max,
        )
    if not diff.within(rtol=1e-4, atol=1e-5):
        assert diff.at is not None
        where = numerical.where(s, *diff.at)
        if not graph:
            why = (
                "the gradient has no autograd graph, so its second derivative comes out as "
                "zero, yet it changes with the inputs: grad_fn computes it outside autograd "
                "(.detach(), .item(), numpy, no_grad, or a tensor f computed under no_grad)"
            )
        else:
            why = "grad_fn's ops lose a dependence on the inputs (a detached or stale tensor?)"
        return Row(
            "second_order",
            FAIL,
            f"the second derivative is wrong: double backward gives "
            f"{diff.got_value:.4g} at {where}, finite differences of the gradient give "
            f"{diff.want_value:.4g}; {why}{f'; {kinks}' if kinks else ''}",
            figure,
            diff.max,
        )
    reason = "double backward matches finite differences of the gradient"
    if not graph:
        reason = "the gradient does not depend on the inputs: the second derivative is zero"
    if kinks:
        return Row(
            "second_order",
            WARN,
            f"{reason} at the other {numerical.compared_count} {numerical.unit}; {kinks}",
            figure,
            diff.max,
        )
    if s.true_gradient and not s.variables and graph:
        if not _gradgradcheck(s):
            return Row(
                "second_order",
                FAIL,
                "torch.autograd.gradgradcheck fails although the gradient is the true one",
                figure,
                diff.max,
            )
        reason += "; gradgradcheck passes"
    return Row("second_order", PASS, reason, figure, diff.max)


def _gradgradcheck(s: _Subject) -> bool:
    inputs = _Inputs(s, F64)
    if sum(t.numel() for t in inputs.inputs) > 16:
        return True  # too slow to be worth it; the finite differences above cover it
    floats = [i for i, p in enumerate(s.tensor_positions) if p in s.float_positions]

    def h(*xs: _Tensor) -> tuple[_Tensor, ...]:
        tensors = list(inputs.tensors)
        for i, x in zip(floats, xs, strict=True):
            tensors[i] = x
        return tuple(_float_outputs(inputs.call_with(tensors)))

    return bool(torch.autograd.gradgradcheck(h, tuple(inputs.inputs), raise_exception=False))


def _transform_skip(s: _Subject, check: str) -> Row | None:
    if not s.float_positions:
        return Row(
            check,
            SKIP,
            "no floating-point positional input (Parameters are constants of "
            "torch.func transforms)",
        )
    return None


def _check_func_grad(s: _Subject) -> Row:
    with s.cast(F64):
        inputs, outputs, upstreams = _forward_f64(s)
        eager = _vjp(outputs, upstreams, inputs.inputs)
        plain = [t.detach() for t in inputs.tensors]
        floats = tuple(i for i, p in enumerate(s.tensor_positions) if p in s.float_positions)

        def loss(*tensors: _Tensor) -> _Tensor:
            return _dot(_float_outputs(inputs.call_with(tensors)), upstreams)

        try:
            got = torch.func.grad(loss, argnums=floats)(*plain)
        except Exception as error:
            return Row("func_grad", WARN, f"torch.func.grad raises {_first_line(error)}")
    diff = _Diff(list(got), eager)
    figure = f"max |func.grad - backward| {_fmt(diff.max)}"
    if diff.differs():
        where = ""
        if diff.at is not None:
            i, k = diff.at
            where = f" at {s.element(i, k, eager[i].shape)} ({diff.got_value:.4g}, backward {diff.want_value:.4g})"
        return Row(
            "func_grad",
            FAIL,
            f"torch.func.grad gives a different gradient{where}",
            figure,
            diff.max,
        )
    return Row("func_grad", PASS, "torch.func.grad gives the eager gradient", figure, diff.max)


def _check_vmap(s: _Subject) -> Row:
    with s.cast(F64):
        base = _Inputs(s, F64, grad=False)
        generator = torch.Generator().manual_seed(11)
        batched = []
        for t in base.tensors:
            if t.is_floating_point():
                noise = torch.randn((BATCH, *t.shape), generator=generator, dtype=F64)
                scale = torch.arange(BATCH, dtype=F64).reshape(BATCH, *([1] * t.dim())) * 0.05
                batched.append(t.unsqueeze(0) + scale * noise.to(t.dtype))
            else:
                batched.append(t.unsqueeze(0).expand(BATCH, *t.shape).clone())
        samples = [[b[j] for b in batched] for j in range(BATCH)]

        def forward(*tensors: _Tensor) -> tuple[_Tensor, ...]:
            return tuple(_float_outputs(base.call_with(tensors)))

        reference = [forward(*sample) for sample in samples]
        stacked = [torch.stack(parts) for parts in zip(*reference, strict=True)]
        try:
            got = torch.func.vmap(forward)(*batched)
        except Exception as error:
            return Row("vmap", WARN, f"vmap of the forward raises {_first_line(error)}")
        diff = _Diff(list(got), stacked)
        if diff.differs():
            return Row(
                "vmap",
                FAIL,
                "vmap of the forward gives other outputs than a loop over the batch",
                f"max difference {_fmt(diff.max)}",
                diff.max,
            )
        upstreams = _upstreams(list(reference[0]), 0)
        floats = tuple(i for i, p in enumerate(s.tensor_positions) if p in s.float_positions)

        def loss(*tensors: _Tensor) -> _Tensor:
            return _dot(forward(*tensors), upstreams)

        eager = []
        for sample in samples:
            leaves = [t.clone().requires_grad_(i in floats) for i, t in enumerate(sample)]
            eager.append(_vjp(list(forward(*leaves)), upstreams, [leaves[i] for i in floats]))
        expected = [torch.stack(parts) for parts in zip(*eager, strict=True)]
        try:
            per_sample = torch.func.vmap(torch.func.grad(loss, argnums=floats))(*batched)
        except Exception as error:
            return Row(
                "vmap",
                WARN,
                f"the batched forward works, but per-sample gradients (vmap of "
                f"grad) raise {_first_line(error)}",
            )
    grad_diff = _Diff(list(per_sample), expected)
    figure = f"max difference {_fmt(max(diff.max, grad_diff.max))}"
    if grad_diff.differs():
        return Row(
            "vmap",
            FAIL,
            "per-sample gradients (vmap of grad) differ from a loop over the batch",
            figure,
            grad_diff.max,
        )
    return Row(
        "vmap",
        PASS,
        f"a batch of {BATCH}: outputs and per-sample gradients match a loop",
        figure,
        max(diff.max, grad_diff.max),
    )


_TORCH_VERSION = torch.__version__  # `torch` is a local name in _check_compile


def _check_compile(s: _Subject) -> Row:
    if not DYNAMO_TRACES_WATCHER:
        return Row(
            "compile",
            SKIP,
            f"torch {_TORCH_VERSION} cannot trace a custom_gradient function: under "
            f"torch.compile, {COMPILE_SUPPORT}; torch >= 2.13 compiles it in one graph",
        )
    import torch._dynamo  # lazily (docs/torch_facts.md, "Importing Dynamo")

    with s.cast(F64), _quiet_compiler_logs():
        inputs, outputs, upstreams = _forward_f64(s)
        eager_grads = _vjp(outputs, upstreams, inputs.targets)
        eager_outputs = [o.detach() for o in outputs]

        def forward(*tensors: _Tensor) -> tuple[_Tensor, ...]:
            return tuple(_float_outputs(inputs.call_with(tensors)))

        torch.compiler.reset()
        explain_inputs = _Inputs(s, F64)
        try:
            explanation = torch._dynamo.explain(forward)(*explain_inputs.tensors)
            breaks = int(explanation.graph_break_count)
            graphs = int(explanation.graph_count)
            reasons = sorted({_break_reason(b) for b in explanation.break_reasons})
        except Exception as error:
            breaks, graphs, reasons = -1, 0, [_first_line(error)]
        figure = f"{breaks} graph break(s)" if breaks >= 0 else ""
        result = _compiled_run(s, forward, upstreams, fullgraph=True)
        if not reasons and isinstance(result, BaseException):
            reasons = [_first_line(result)]
        why = f" ({'; '.join(reasons)})" if reasons else ""
        if isinstance(result, BaseException):
            fallback = _compiled_run(s, forward, upstreams, fullgraph=False)
            if isinstance(fallback, BaseException):
                return Row(
                    "compile", FAIL, f"torch.compile raises {_first_line(fallback)}", figure, breaks
                )
            fallback_diff = _compare_compiled(fallback, eager_outputs, eager_grads)
            if fallback_diff is not None:
                return Row(
                    "compile",
                    FAIL,
                    f"torch.compile (with graph breaks) {fallback_diff}",
                    figure,
                    breaks,
                )
            if breaks > 0:
                return Row(
                    "compile",
                    WARN,
                    f"fullgraph=True raises: {breaks} graph break(s){why}; "
                    "plain torch.compile runs it in pieces and gets it right",
                    figure,
                    breaks,
                )
            return Row(
                "compile",
                WARN,
                f"fullgraph=True raises {_first_line(result)}; plain torch.compile gets it right",
                figure,
                breaks,
            )
        problem = _compare_compiled(result, eager_outputs, eager_grads)
        if problem is not None:
            return Row("compile", FAIL, f"torch.compile(fullgraph=True) {problem}", figure, breaks)
        if breaks > 0:
            return Row(
                "compile",
                WARN,
                f"compiles with fullgraph=True, but plain torch.compile splits "
                f"it: {breaks} graph break(s){why}",
                figure,
                breaks,
            )
        return Row(
            "compile",
            PASS,
            f"fullgraph=True: {max(graphs, 1)} graph, no graph break; outputs and "
            "gradients match eager",
            figure,
            0,
        )


def _break_reason(entry: Any) -> str:
    text = str(getattr(entry, "reason", entry)).strip().splitlines()
    reason = text[0] if text else "unknown"
    return reason if len(reason) <= 120 else reason[:117] + "..."


def _compiled_run(
    s: _Subject,
    forward: Callable[..., tuple[_Tensor, ...]],
    upstreams: Sequence[_Tensor],
    *,
    fullgraph: bool,
) -> tuple[list[_Tensor], list[_Tensor]] | BaseException:
    torch.compiler.reset()
    inputs = _Inputs(s, F64)
    compiled = torch.compile(forward, fullgraph=fullgraph, backend="aot_eager")
    try:
        outputs = list(compiled(*inputs.tensors))
        grads = _vjp(outputs, upstreams, inputs.targets)
    except Exception as error:
        return error
    finally:
        torch.compiler.reset()
    return [o.detach() for o in outputs], grads


def _compare_compiled(
    result: tuple[list[_Tensor], list[_Tensor]],
    outputs: Sequence[_Tensor],
    grads: Sequence[_Tensor],
) -> str | None:
    got_outputs, got_grads = result
    for what, got, want in (("outputs", got_outputs, outputs), ("gradients", got_grads, grads)):
        diff = _Diff(got, want)
        if diff.differs(rtol=1e-7, atol=1e-10):
            return f"gives other {what} than eager (max difference {_fmt(diff.max)})"
    return None


def _check_autocast(s: _Subject) -> Row:
    device = next((t.device.type for t in s.leaves if isinstance(t, _Tensor)), "cpu")
    dtype = torch.bfloat16
    with s.cast(torch.float32):
        reference = _Inputs(s, torch.float32)
        ref_outputs = _float_outputs(reference.call())
        upstreams = _upstreams(ref_outputs, 0)
        ref_grads = _vjp(ref_outputs, upstreams, reference.targets)
        inputs = _Inputs(s, torch.float32)
        try:
            with torch.autocast(device, dtype=dtype):
                outputs = _float_outputs(inputs.call())
            ups = [u.to(o.dtype) for u, o in zip(upstreams, outputs, strict=True)]
            grads = _vjp(outputs, ups, inputs.targets)
        except Exception as error:
            return Row(
                "autocast",
                FAIL,
                f"under torch.autocast({device!r}, bfloat16): {_first_line(error)}",
            )
    for i, (g, t) in enumerate(zip(grads, inputs.targets, strict=True)):
        if g.dtype != t.dtype:
            return Row(
                "autocast",
                FAIL,
                f"the gradient for `{s.target_name(i)}` is {g.dtype}; the input is {t.dtype}",
            )
    diff = _Diff(grads, ref_grads)
    figure = f"max relative difference {_fmt(diff.relative)}"
    if diff.bad_got is not None:
        i, k, got, want = diff.bad_got
        return Row(
            "autocast",
            FAIL,
            f"the gradient is {got} at {s.element(i, k, grads[i].shape)} under "
            f"autocast, {want:.4g} in float32",
            figure,
            diff.relative,
        )
    lowered = sorted({str(o.dtype).replace("torch.", "") for o in outputs})
    if diff.relative > 0.1:
        return Row(
            "autocast",
            WARN,
            "runs, but the gradient differs from float32 by more than bfloat16 rounding explains",
            figure,
            diff.relative,
        )
    return Row(
        "autocast",
        PASS,
        f"runs under autocast (outputs {', '.join(lowered)}); gradients in the "
        "inputs' dtype, within bfloat16 rounding of float32",
        figure,
        diff.relative,
    )


def _recorded(tensor: _Tensor) -> bool:
    """Whether tensor, or the tensor it is a view of, was made by a recorded op."""
    base = tensor if tensor._base is None else tensor._base
    return tensor.grad_fn is not None or base.grad_fn is not None


def _check_no_grad(s: _Subject) -> Row:
    with _seeded(5):
        reference = [
            o.detach() for o in _structure.leaves(_Inputs(s, None).call()) if isinstance(o, _Tensor)
        ]
    results = {}
    for label, mode in (
        ("torch.no_grad()", torch.no_grad),
        ("torch.inference_mode()", torch.inference_mode),
    ):
        inputs = _Inputs(s, None)
        try:
            with _seeded(5), mode():
                out = inputs.call()
        except Exception as error:
            return Row("no_grad", FAIL, f"under {label}: {_first_line(error)}")
        tensors = [o for o in _structure.leaves(out) if isinstance(o, _Tensor)]
        # Requiring grad is not enough: an input returned as it is (`return x, lambda dy: -dy`)
        # requires grad under the mode too, as with `lambda x: x`.
        if any(_recorded(o) for o in tensors):
            return Row("no_grad", FAIL, f"under {label} an output is recorded in a graph")
        diff = _Diff(tensors, reference) if len(tensors) == len(reference) else None
        if (
            diff is None
            or diff.n_bad_got
            or diff.n_bad_want
            or not diff.within(rtol=1e-6, atol=1e-9)
        ):
            figure = f"max difference {_fmt(diff.max)}" if diff is not None else ""
            return Row(
                "no_grad",
                FAIL,
                f"under {label} the outputs differ from those with grad enabled",
                figure,
            )
        results[label] = diff.max
    return Row(
        "no_grad",
        PASS,
        "torch.no_grad() and torch.inference_mode() give the same outputs, with no graph",
        f"max difference {_fmt(max(results.values()))}",
        max(results.values()),
    )


def _check_inplace(s: _Subject) -> Row:
    if not s.float_positions:
        return Row("inplace", SKIP, "no floating-point positional input to edit")
    with s.cast(F64):
        with _seeded(9):
            reference = _Inputs(s, F64)
            outputs = _float_outputs(reference.call())
            upstreams = _upstreams(outputs, 0)
            expected = _vjp(outputs, upstreams, reference.inputs)
        with _seeded(9):
            inputs = _Inputs(s, F64)
            outputs = _float_outputs(inputs.call())
        with torch.no_grad():
            for t in inputs.inputs:
                t.mul_(-2.0).add_(0.3)
        names = ", ".join(f"`{s.target_name(i)}`" for i in range(len(inputs.inputs)))
        try:
            got = _vjp(outputs, upstreams, inputs.inputs)
        except RuntimeError as error:
            if "modified by an inplace operation" in str(error):
                return Row(
                    "inplace",
                    PASS,
                    f"detected: after an in-place edit of {names}, backward "
                    "raises torch's 'modified by an inplace operation' error",
                )
            return Row(
                "inplace",
                FAIL,
                f"after an in-place edit of {names}, backward raises {_first_line(error)}",
            )
    diff = _Diff(got, expected)
    figure = f"max change {_fmt(diff.max)}"
    if diff.differs():
        where = ""
        if diff.at is not None:
            i, k = diff.at
            where = f" ({s.element(i, k, got[i].shape)}: {diff.want_value:.4g} became {diff.got_value:.4g})"
        return Row(
            "inplace",
            FAIL,
            f"an in-place edit of {names} after forward silently changes the "
            f"gradient{where}: grad_fn reads the input through a list, dict, attribute or global. "
            "Close over the tensor directly so it is saved with save_for_backward",
            figure,
            diff.max,
        )
    return Row(
        "inplace",
        PASS,
        f"the gradient does not read {names} (an in-place edit after forward leaves it unchanged)",
        figure,
        diff.max,
    )


class _Tracker(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Weak references to every tensor made while active."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.made: list[tuple[str, weakref.ref[_Tensor]]] = []

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        out = func(*args, **(kwargs or {}))
        for o in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(o, _Tensor):
                self.made.append(
                    (str(getattr(func, "__name__", func)).split(".")[0], weakref.ref(o))
                )
        return out

    def alive(self, exclude: Iterable[_Tensor] = ()) -> list[tuple[str, _Tensor]]:
        skip = {id(t) for t in exclude}
        found = []
        seen: set[int] = set()
        for op, ref in self.made:
            t = ref()
            if t is not None and id(t) not in skip and id(t) not in seen:
                seen.add(id(t))
                found.append((op, t))
        return found


def _describe_alive(alive: list[tuple[str, _Tensor]]) -> tuple[str, int]:
    size = sum(t.numel() * t.element_size() for _, t in alive)
    op, t = alive[0]
    return (
        f"{len(alive)} tensor(s), {_bytes(size)}, e.g. the result of {op} of shape {list(t.shape)}",
        size,
    )


def _check_memory(s: _Subject) -> Row:
    tracker = _Tracker()
    inputs = _Inputs(s, None)
    with tracker:
        out = inputs.call()
        outputs = _float_outputs(out)
        upstreams = [torch.ones_like(o) for o in outputs]
        nodes = [weakref.ref(o.grad_fn) for o in outputs if o.grad_fn is not None]
        _vjp(outputs, upstreams, inputs.targets)
    del upstreams
    kept_by_graph = tracker.alive(
        exclude=[o for o in _structure.leaves(out) if isinstance(o, _Tensor)]
    )
    kept_by_graph_text = _describe_alive(kept_by_graph) if kept_by_graph else None
    del out, outputs, kept_by_graph
    leaked_before_gc = bool(tracker.alive()) or any(n() is not None for n in nodes)
    gc.collect()
    leaked = tracker.alive()
    if leaked:
        text, size = _describe_alive(leaked)
        return Row(
            "memory",
            FAIL,
            f"{text} stay alive after backward and after the outputs are freed: "
            "f or grad_fn keeps a reference (a global list, an attribute, a cache)",
            _bytes(size),
            size,
        )
    if any(n() is not None for n in nodes):
        return Row(
            "memory", FAIL, "the output's graph node stays alive after the outputs are freed"
        )
    if leaked_before_gc:
        return Row(
            "memory",
            WARN,
            "freed only by the garbage collector, not when the outputs are "
            "freed: a reference cycle through the graph (e.g. grad_fn closing over an output "
            "kept outside save_for_backward)",
        )
    if kept_by_graph_text is not None:
        text, size = kept_by_graph_text
        return Row(
            "memory",
            WARN,
            f"{text} stay alive after backward until the outputs are freed: "
            "grad_fn holds them in a list, dict or object that cannot be saved with "
            "save_for_backward; close over the tensors directly so backward frees them",
            _bytes(size),
            size,
        )
    return Row(
        "memory",
        PASS,
        "after backward only the outputs are alive; the graph and everything "
        "f made are freed with them, without the garbage collector",
        "0 bytes",
        0,
    )


_CHECK_FUNCTIONS: dict[str, Callable[[_Subject], Row]] = {
    "forward": _check_forward,
    "gradients": _check_gradients,
    "numerical": _check_numerical,
    "autodiff": _check_autodiff,
    "linearity": _check_linearity,
    "determinism": _check_determinism,
    "second_order": _check_second_order,
    "func_grad": _check_func_grad,
    "vmap": _check_vmap,
    "compile": _check_compile,
    "autocast": _check_autocast,
    "no_grad": _check_no_grad,
    "inplace": _check_inplace,
    "memory": _check_memory,
}
assert list(_CHECK_FUNCTIONS) == list(CHECKS)


# --- running them -------------------------------------------------------------------------


def resolve_example(example: Any) -> Example:
    """An `Example` from what `custom_gradient(example=...)` holds."""
    if callable(example) and not isinstance(example, (Example, _Tensor)):
        with _seeded(0):
            example = example()
    if isinstance(example, Example):
        return example
    if isinstance(example, tuple):
        return Example(*example)
    return Example(example)


def location(fn: Callable[..., Any]) -> str:
    cg, _, _ = _unwrap(fn)
    target = inspect.unwrap(cg._f if cg is not None else getattr(fn, "__func__", fn))
    code = getattr(target, "__code__", None)
    if code is None:
        return ""
    path = code.co_filename
    try:
        relative = os.path.relpath(path)
        if not relative.startswith(".."):
            path = relative
    except ValueError:  # another drive
        pass
    return f"{path}:{code.co_firstlineno}"


def function_name(fn: Callable[..., Any]) -> str:
    cg, _, _ = _unwrap(fn)
    target = cg if cg is not None else fn
    return str(
        getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(fn)
    )


def run(
    fn: Callable[..., Any],
    example: Any,
    *,
    only: Iterable[str] | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    names = list(CHECKS) if only is None else list(dict.fromkeys(only))
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ValueError(
            f"tf_compat_grad: unknown check(s) {', '.join(map(repr, unknown))}; the checks are "
            f"{', '.join(CHECKS)}"
        )
    title = name or function_name(fn)
    try:
        resolved = resolve_example(example)
    except Exception as error:
        rows = [Row(n, SKIP, "the example inputs raise") for n in names]
        rows.insert(
            0, Row("forward", FAIL, f"making the example inputs raises {_first_line(error)}")
        )
        return Report(title, location(fn), "", [r for r in rows if r.check in names] or rows[:1])
    subject = _Subject(fn, resolved)
    results: dict[str, Row] = {}

    def run_one(check: str) -> Row:
        if progress is not None:
            progress(check)
        start = time.perf_counter()
        with _seeded(0), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                row = _CHECK_FUNCTIONS[check](subject)
            except Exception as error:
                row = Row(check, FAIL, f"raises {_first_line(error)}")
        row.seconds = time.perf_counter() - start
        results[check] = row
        return row

    forward = run_one("forward")
    gradients = None
    if forward.status is not FAIL and any(n in names for n in ("gradients", *_NEEDS_GRADIENT)):
        gradients = _gradient_skip(subject, "gradients") or run_one("gradients")
        results["gradients"] = gradients
    for check in (c for c in CHECKS if c in names):  # in order: second_order reads numerical
        if check in results:
            continue
        if forward.status is FAIL:
            results[check] = Row(check, SKIP, "the forward fails (see `forward`)")
        elif check in _NEEDS_GRADIENT:
            skip = _gradient_skip(subject, check)
            if check in ("func_grad", "vmap", "inplace") and skip is None:
                skip = _transform_skip(subject, check)
            if skip is None and gradients is not None and gradients.status is FAIL:
                skip = Row(check, SKIP, "no usable gradient (see `gradients`)")
            results[check] = skip or run_one(check)
        else:
            run_one(check)
    rows = [results[n] for n in CHECKS if n in names]
    return Report(title, location(fn), repr(resolved), rows)
