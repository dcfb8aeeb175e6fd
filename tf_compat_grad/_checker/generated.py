"""Example inputs built from a function's signature, for a decorated function without
`example=`, so that `python -m tf_compat_grad check` checks it anyway.

Each parameter without a default gets a value by its annotation: a float64 tensor for one annotated
as a tensor or not annotated, a Python float for `float`, the int 1 for `int`. Parameters with a
default keep it, and `*args` and `**kwargs` stay empty. The tensors share a shape, tried in the
order of SHAPES, each with values of both signs and then positive ones (for log, sqrt).

The values come from a fixed seed, so a run is reproducible, and keep at least 0.1 from every
multiple of 0.5: kinks and jumps sit at 0 and at integers (relu, round, floors), and a point
on one is no place to take finite differences. An input is taken once the forward and backward
run on it with finite outputs; failing that, the first on which the forward runs, so that the
checks report what goes wrong.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch

from .numerics import F64, _first_line, _float_outputs, _seeded, _vjp
from .report import Example
from .subject import _unwrap

SHAPES: tuple[tuple[int, ...], ...] = ((4,), (3, 3), ())
SEED = 0


class CannotBuild(Exception):
    """No example inputs can be built for the function; the message says why."""


def build(fn: Callable[..., Any], owner: type | None = None) -> tuple[Example, str]:
    """Example inputs for `fn` (a decorated function, or a decorated method taken from its
    class `owner`), and a description of them for the report.

    Raises:
        CannotBuild: a parameter's annotation has no generated value, the signature cannot be
            read, the instance of `owner` cannot be made, or the forward raises on every shape.
    """
    cg, prefix, self_arg = _unwrap(fn)
    target = cg.__tf_compat_grad_calls__() if cg is not None else fn
    parameters = _parameters(target)
    if prefix or self_arg:
        parameters = parameters[1:]
    instance: tuple[Any, ...] = ()
    if self_arg:
        instance = (_instance(owner),)
    kinds = {p.name: _kind(p) for p in parameters}
    unknown = [p for p in parameters if kinds[p.name] is None]
    if unknown:
        raise CannotBuild(
            "; ".join(
                f"parameter `{p.name}` is annotated `{_annotation_text(p.annotation)}`, "
                "which has no generated value (only tensors, float and int have)"
                for p in unknown
            )
        )
    errors: dict[tuple[int, ...], BaseException] = {}
    fallback: tuple[Example, str] | None = None
    for shape in SHAPES:
        for positive in (False, True):
            example = _example(parameters, kinds, instance, shape, positive)
            problem = _try(fn, example)
            if isinstance(problem, BaseException):
                errors.setdefault(shape, problem)
                continue
            what = f"generated from the signature (seed {SEED}{', positive values' if positive else ''})"
            if not problem:
                return example, what
            if fallback is None:
                fallback = example, f"{what}; no generated input runs cleanly, here {problem}"
    if fallback is not None:
        return fallback
    tried = "; ".join(f"shape {list(s)}: {_first_line(e)}" for s, e in errors.items())
    raise CannotBuild(f"the forward raises on every generated input ({tried})")


def _parameters(target: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters to fill: those without a default, *args and **kwargs left out."""
    try:
        try:
            signature = inspect.signature(target, eval_str=True)
        except Exception:  # an annotation that does not evaluate: read it as text
            signature = inspect.signature(target)
    except (TypeError, ValueError) as error:
        raise CannotBuild(f"its signature cannot be read: {_first_line(error)}") from None
    return [
        p
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _kind(parameter: inspect.Parameter) -> str | None:
    annotation = parameter.annotation
    if annotation is parameter.empty:
        return "tensor"
    if isinstance(annotation, type):
        if issubclass(annotation, torch.Tensor):
            return "tensor"
        if annotation in (float, int):
            return annotation.__name__
        return None
    text = str(annotation).replace(" ", "")
    if text in ("Tensor", "torch.Tensor"):
        return "tensor"
    return text if text in ("float", "int") else None


def _annotation_text(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    return inspect.formatannotation(annotation)


def _instance(owner: type | None) -> Any:
    if owner is None:
        raise CannotBuild("a method whose class is unknown, so there is no instance to call it on")
    try:
        with _seeded(SEED), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return owner()
    except Exception as error:
        raise CannotBuild(
            f"a method of `{owner.__qualname__}`, and `{owner.__qualname__}()` raises "
            f"{_first_line(error)}"
        ) from None


def _values(shape: tuple[int, ...], generator: torch.Generator, positive: bool) -> torch.Tensor:
    """In [-1.9, 1.9] (or [0.1, 1.9]), at least 0.1 from every multiple of 0.5."""
    whole = torch.randint(0 if positive else -2, 2, shape, generator=generator, dtype=F64)
    half = 0.5 * torch.randint(0, 2, shape, generator=generator, dtype=F64)
    return whole + half + 0.1 + 0.3 * torch.rand(shape, generator=generator, dtype=F64)


def _example(
    parameters: list[inspect.Parameter],
    kinds: dict[str, str | None],
    instance: tuple[Any, ...],
    shape: tuple[int, ...],
    positive: bool,
) -> Example:
    generator = torch.Generator().manual_seed(SEED)
    args: list[Any] = list(instance)
    kwargs: dict[str, Any] = {}
    for p in parameters:
        kind = kinds[p.name]
        if kind == "tensor":
            value: Any = _values(shape, generator, positive)
        elif kind == "float":
            value = round(float(_values((), generator, positive=True)), 3)
        else:
            value = 1
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return Example(*args, **kwargs)


def _try(fn: Callable[..., Any], example: Example) -> str | BaseException:
    """What is amiss when f runs on `example` (empty if nothing: the forward and backward run
    and the outputs are finite); the error if the forward raises."""
    args = [a.detach().requires_grad_() if _is_float(a) else a for a in example.args]
    try:
        with _seeded(SEED), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            outputs = _float_outputs(fn(*args, **example.kwargs))
            if not all(bool(torch.isfinite(o).all()) for o in outputs):
                return "its outputs are not all finite"
            try:
                upstreams = [torch.ones_like(o) for o in outputs]
                _vjp(outputs, upstreams, [a for a in args if _is_float(a)])
            except Exception as error:
                return f"its backward raises {_first_line(error)}"
    except Exception as error:
        return error
    return ""


def _is_float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()
