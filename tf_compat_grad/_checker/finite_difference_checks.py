"""The checks against finite differences: the gradient against the true derivative
(`numerical`), and double backward against finite differences of the gradient
(`second_order`), with the elements on a kink or jump set apart (Note [kinks] in
`finite_differences.py`; Note [statuses] in `runner.py`).

# Note [surrogates]
A custom gradient that differs from the true derivative is either a bug or a surrogate (a
straight-through estimator, gradient reversal, a clipped gradient), and only its author knows which:
`custom_gradient(surrogate="why")` (or `check(..., surrogate=)`) says so, and `grad_pass_through` is
one by definition. A declared difference is reported with the reason and passes. An undeclared one
fails where the true derivative is known: away from kinks, where the finite differences and autodiff
of f's own ops (ignoring its grad_fn) agree, or from finite differences alone where f's ops cannot
be differentiated (round, numpy, no_grad). Where the two disagree (an ill-conditioned point, an op
whose torch gradient is no derivative) the true derivative is uncertain, and a difference is a WARN.
The word "deliberately" is kept for the declared ones.
"""

from __future__ import annotations

import torch

from .. import _structure
from .finite_differences import _Numerical
from .numerics import (
    DIRECTIONS,
    F64,
    FAIL,
    PASS,
    WARN,
    _apart,
    _Diff,
    _dot,
    _first_line,
    _float_outputs,
    _fmt,
    _random_like,
    _Tensor,
    _vjp,
)
from .report import Row
from .subject import _forward_f64, _Inputs, _Subject, autodiff_of_f

# The custom gradient matches finite differences within ATOL + RTOL * (the largest numerical
# value); autodiff of f agrees with finite differences within AGREE times that.
RTOL, ATOL, AGREE = 1e-5, 1e-6, 10.0


def _check_numerical(s: _Subject) -> Row:
    """The custom gradient against the true derivative (Note [surrogates])."""
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
    s.wrong = False
    if reason := diff.nonfinite(
        "the custom gradient is {got} at {where} where the numerical derivative is finite "
        "({want:.4g}); {n} such element(s)",
        lambda i, k: numerical.where(s, i, k),
    ):
        s.wrong = True
        return Row("numerical", FAIL, reason, figure, diff.max)
    undefined = f"; {how} undefined at {diff.n_bad_want} element(s)" if diff.n_bad_want else ""
    if not numerical.compared_count:
        return Row("numerical", WARN, _nothing_compared(kinks, "the gradient"), figure, diff.max)
    on_kinks = f"; {kinks}" if kinks else ""
    if diff.within(rtol=RTOL, atol=ATOL):
        declared = (
            f"; declared a surrogate ({s.surrogate!r}), yet the true derivative here"
            if s.surrogate
            else ""
        )
        if kinks:
            return Row(
                "numerical",
                WARN,
                f"matches the true derivative ({how}) at the other "
                f"{numerical.compared_count} {numerical.unit}{declared}; {kinks}{undefined}",
                figure,
                diff.max,
            )
        s.true_gradient = True
        return Row(
            "numerical",
            PASS,
            f"matches the true derivative ({how}){declared}{undefined}",
            figure,
            diff.max,
        )
    assert diff.at is not None
    shown, true = _apart(diff.got_value, diff.want_value)
    largest = f"largest at {numerical.where(s, *diff.at)} (custom {shown}, numerical {true})"
    if s.surrogate:
        return Row(
            "numerical",
            PASS,
            f"deliberately differs from the true derivative, as declared: surrogate "
            f"{s.surrogate!r}; at {diff.count} {numerical.unit}, {largest}{undefined}{on_kinks}",
            figure,
            diff.max,
        )
    auto = autodiff_of_f(s, upstreams)
    confirmed = _confirmed(numerical, diff, None if isinstance(auto, str) else auto)
    if confirmed is None:
        assert not isinstance(auto, str)
        return Row(
            "numerical",
            WARN,
            f"differs from finite differences at {diff.count} {numerical.unit}, {largest}, "
            "but autodiff of f does not confirm them there, so the true derivative is "
            "uncertain (f computes in low precision, an ill-conditioned point, or ops whose "
            f"torch gradient is no derivative): try other example inputs{undefined}{on_kinks}",
            figure,
            diff.max,
        )
    s.wrong = True
    count, (i, k), got, want, by_autodiff = confirmed
    shown, true = _apart(got, want)
    evidence = "finite differences and autodiff of f agree" if by_autodiff else how
    return Row(
        "numerical",
        FAIL,
        f"the custom gradient is not the true derivative at {count} {numerical.unit}: largest "
        f"at {numerical.where(s, i, k)}: custom {shown}, true {true} ({evidence})"
        f"{undefined}{on_kinks}. If the difference is intended (a straight-through estimator, "
        'a clipped or reversed gradient), declare it: `@custom_gradient(surrogate="why")`',
        figure,
        diff.max,
    )


def _confirmed(
    numerical: _Numerical, diff: _Diff, auto: list[_Tensor] | None
) -> tuple[int, tuple[int, int], float, float, bool] | None:
    """Where the custom gradient differs from finite differences away from kinks, and autodiff
    of f (when there is one) agrees with finite differences and not with the custom gradient:
    how many such elements, the
    largest (target, element), the custom and the true value, and whether autodiff confirmed
    it. None where there is none (Note [surrogates])."""
    tol = ATOL + RTOL * diff.scale
    projected = numerical.project(auto) if auto is not None else None
    count, best, at = 0, -1.0, (0, 0)
    for i, (c, n, kinked) in enumerate(
        zip(numerical.analytic, numerical.numerical, numerical.kinked, strict=True)
    ):
        gap = (c - n).abs()
        off = torch.isfinite(c) & torch.isfinite(n) & ~kinked & (gap > tol)
        if projected is not None:  # autodiff of f sides with finite differences, not custom
            a = projected[i]
            off &= ((a - n).abs() <= AGREE * tol) & ((c - a).abs() > tol)  # False at NaN
        count += int(off.sum())
        if off.any():
            k = int(torch.where(off, gap, -1.0).argmax())
            if float(gap[k]) > best:
                best, at = float(gap[k]), (i, k)
    if not count:
        return None
    i, k = at
    return (
        count,
        at,
        float(numerical.analytic[i][k]),
        float(numerical.numerical[i][k]),
        (projected is not None),
    )


def _nothing_compared(kinks: str, what: str) -> str:
    if not kinks:
        return f"nothing compared: the example inputs have no elements. Give some to check {what}"
    return f"nothing compared: {kinks}. Give example inputs away from the kinks to check {what}"


def _check_second_order(s: _Subject) -> Row:
    with s.cast(F64):
        inputs = _Inputs(s, F64)
        targets = inputs.targets
        outputs = _float_outputs(inputs.call())
        upstreams = _random_like(outputs, 0)
        weights = _random_like(targets, 3)
        try:
            grads = _vjp(outputs, upstreams, targets, create_graph=True)
            total = _dot(grads, weights)
            graph = total.requires_grad
            analytic = (
                _vjp([total], [torch.ones_like(total)], targets)
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
    if reason := diff.nonfinite(
        "double backward gives {got} at {where} where the gradient's finite differences give "
        "{want:.4g}",
        lambda i, k: numerical.where(s, i, k),
    ):
        return Row("second_order", FAIL, reason, figure, diff.max)
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
        return tuple(_float_outputs(inputs.call_with(_structure.put(inputs.tensors, floats, xs))))

    return bool(torch.autograd.gradgradcheck(h, tuple(inputs.inputs), raise_exception=False))
