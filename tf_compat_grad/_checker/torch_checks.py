"""The checks of what training code does with the function: torch.compile, autocast, no-grad,
in-place edits and memory (the torch.func checks are in `torch_func_checks.py`; Note
[statuses] in `runner.py`)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from .. import _structure
from .._torch_internals import COMPILE_SUPPORT, DYNAMO_TRACES_WATCHER, TorchDispatchMode, dynamo
from .numerics import (
    F64,
    FAIL,
    PASS,
    SKIP,
    WARN,
    _bytes,
    _Diff,
    _first_line,
    _float_outputs,
    _fmt,
    _quiet_compiler_logs,
    _random_like,
    _seeded,
    _Tensor,
    _vjp,
)
from .report import Row, Status
from .subject import _forward_f64, _Inputs, _Subject


def _check_compile(s: _Subject) -> Row:
    if not DYNAMO_TRACES_WATCHER:
        return Row(
            "compile",
            SKIP,
            f"torch {torch.__version__} cannot trace a custom_gradient function: under "
            f"torch.compile, {COMPILE_SUPPORT}; torch >= 2.13 compiles it in one graph",
        )
    with s.cast(F64), _quiet_compiler_logs():
        inputs, outputs, upstreams = _forward_f64(s)
        eager_grads = _vjp(outputs, upstreams, inputs.targets)
        eager_outputs = [o.detach() for o in outputs]

        def forward(*tensors: _Tensor) -> tuple[_Tensor, ...]:
            return tuple(_float_outputs(inputs.call_with(tensors)))

        torch.compiler.reset()
        explain_inputs = _Inputs(s, F64)
        try:
            explanation = dynamo().explain(forward)(*explain_inputs.tensors)
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

        def row(status: Status, reason: str) -> Row:
            return Row("compile", status, reason, figure, breaks)

        if isinstance(result, BaseException):
            fallback = _compiled_run(s, forward, upstreams, fullgraph=False)
            if isinstance(fallback, BaseException):
                return row(FAIL, f"torch.compile raises {_first_line(fallback)}")
            fallback_diff = _compare_compiled(fallback, eager_outputs, eager_grads)
            if fallback_diff is not None:
                return row(FAIL, f"torch.compile (with graph breaks) {fallback_diff}")
            if breaks > 0:
                return row(
                    WARN,
                    f"fullgraph=True raises: {breaks} graph break(s){why}; "
                    "plain torch.compile runs it in pieces and gets it right",
                )
            return row(
                WARN,
                f"fullgraph=True raises {_first_line(result)}; plain torch.compile gets it right",
            )
        problem = _compare_compiled(result, eager_outputs, eager_grads)
        if problem is not None:
            return row(FAIL, f"torch.compile(fullgraph=True) {problem}")
        if breaks > 0:
            return row(
                WARN,
                f"compiles with fullgraph=True, but plain torch.compile splits it: {breaks} "
                f"graph break(s){why}",
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
        upstreams = _random_like(ref_outputs, 0)
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
    if reason := diff.nonfinite(
        "the gradient is {got} at {where} under autocast, {want:.4g} in float32",
        s.elements_of(grads),
    ):
        return Row("autocast", FAIL, reason, figure, diff.relative)
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
            upstreams = _random_like(outputs, 0)
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
        where = diff.largest(" ({where}: {want:.4g} became {got:.4g})", s.elements_of(got))
        return Row(
            "inplace",
            FAIL,
            f"an in-place edit of {names} after forward silently changes the "
            f"gradient{where}: grad_fn reads the input through an attribute, a global or a "
            "list or dict made outside f. "
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
