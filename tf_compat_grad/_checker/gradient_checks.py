"""The checks of the gradient itself: forward, gradients, autodiff, linearity and determinism
(those against finite differences are in `finite_difference_checks.py`; Note [statuses] in
`runner.py`)."""

from __future__ import annotations

import math

import torch

from .. import _run, _structure
from .._record import Record
from .._watcher import ParameterWatcher, run_watched
from .finite_difference_checks import _check_numerical
from .numerics import (
    F64,
    FAIL,
    LINEAR_A,
    LINEAR_B,
    PASS,
    SKIP,
    WARN,
    _apart,
    _Diff,
    _first_line,
    _float_outputs,
    _fmt,
    _random_like,
    _seeded,
    _Tensor,
    _vjp,
)
from .report import Row
from .subject import _forward_f64, _Inputs, _Subject, autodiff_of_f

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
    try:
        grads = _vjp(outputs, _random_like(outputs, 0), inputs.targets, materialize=False)
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
    f = s.cg.__tf_compat_grad_calls__()
    inputs = _Inputs(s, None)
    positional = inputs.args[1:] if s.self_arg else inputs.args
    flat_args, layout, tensors = _run.inputs(f, s.bound, positional)
    with torch.enable_grad():
        result, grad_fn, variables = run_watched(
            f, s.bound, positional, inputs.kwargs, flat_args, captured=s.cg.captured
        )
    record = Record.of_call(layout, tensors, variables)
    outputs, _ = _run.outputs(f, result)
    upstreams = [
        u if o.is_floating_point() else torch.zeros_like(o)
        for o, u in zip(outputs, _random_like(outputs, 0), strict=True)
    ]
    with torch.no_grad():
        returned = record.gradients(grad_fn, upstreams, (), raw=True)
    names = [s.names[p] or "x" for p in layout.positions]
    names += [f"variables[{j}]" for j in range(len(variables))]
    notes: list[str] = []
    for name, g, x in zip(names, returned, [*tensors, *variables], strict=True):
        if not isinstance(g, _Tensor) or not x.is_floating_point():
            continue
        if g.shape != x.shape:
            how = "expanded" if not g.dim() else "summed down"  # a smaller one is refused
            notes.append(
                f"grad_fn returns shape {list(g.shape)} for `{name}` of shape {list(x.shape)} "
                f"({how} by tf_compat_grad; is that intended?)"
            )
        if g.dtype != x.dtype:
            notes.append(f"grad_fn returns {g.dtype} for `{name}` of dtype {x.dtype} (cast)")
    return notes


def _check_autodiff(s: _Subject) -> Row:
    with s.cast(F64):
        inputs, outputs, upstreams = _forward_f64(s)
        custom = _vjp(outputs, upstreams, inputs.targets)
    auto = autodiff_of_f(s, upstreams)
    if isinstance(auto, str):
        return Row("autodiff", SKIP, auto)
    if s.wrong is None and not s.surrogate:
        _check_numerical(s)  # run alone (`only=["autodiff"]`): it tells a kink from a wrong rule
    diff = _Diff(custom, auto)
    figure = f"max |custom - autodiff| {_fmt(diff.max)}"
    if reason := diff.nonfinite(
        "the custom gradient is {got} at {where} where autodiff of f gives {want:.4g}; "
        "{n} such element(s)",
        s.elements_of(custom),
    ):
        return Row("autodiff", FAIL, reason, figure, diff.max)
    stable = (
        f"; finite at {diff.n_bad_want} element(s) where autodiff of f gives nan/inf"
        if diff.n_bad_want
        else ""
    )
    if diff.within(rtol=1e-6, atol=1e-9):
        return Row("autodiff", PASS, f"matches autodiff of f's own ops{stable}", figure, diff.max)
    assert diff.at is not None
    where = s.element(diff.at[0], diff.at[1], custom[diff.at[0]].shape)
    shown, autodiff = _apart(diff.got_value, diff.want_value)
    differs = (
        f"differs from autodiff of f at {diff.count} element(s): largest at {where} "
        f"(custom {shown}, autodiff {autodiff}){stable}"
    )
    if s.surrogate:
        return Row(
            "autodiff",
            PASS,
            f"deliberately {differs}, as declared: surrogate {s.surrogate!r}",
            figure,
            diff.max,
        )
    if s.wrong:
        return Row(
            "autodiff",
            FAIL,
            f"{differs}; finite differences agree with autodiff (see `numerical`)",
            figure,
            diff.max,
        )
    why = (
        "where the numerical check compared them, the custom gradient is the true derivative: "
        "the rest sit on a kink, where autodiff of f picks one side, or f's ops have no true "
        "gradient in torch"
        if s.wrong is False
        else "run the `numerical` check to tell a wrong gradient from a kink"
    )
    return Row("autodiff", WARN, f"{differs}; {why}", figure, diff.max)


def _check_linearity(s: _Subject) -> Row:
    a, b = LINEAR_A, LINEAR_B
    with s.cast(F64):
        inputs = _Inputs(s, F64)
        outputs = _float_outputs(inputs.call())
        u, v = _random_like(outputs, 1), _random_like(outputs, 2)
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
    reason = at_zero.nonfinite(
        "grad_fn gives {got} at {where} for a zero upstream gradient; an output the loss does "
        "not use gets a zero upstream, so this puts nan/inf into the gradients",
        s.elements_of(g0),
    ) or mix.nonfinite(
        f"grad_fn({a:g}u {b:+g}v) is {{got}} at {{where}} where {a:g} grad_fn(u) {b:+g} "
        "grad_fn(v) is finite",
        s.elements_of(gm),
    )
    if reason:
        return Row("linearity", FAIL, reason, figure, math.inf)
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
            if not nan_mismatch:
                where = diff.largest(
                    " at {where} ({want:.6g} then {got:.6g})", s.elements_of(first)
                )
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
