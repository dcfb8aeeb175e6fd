"""grad_fn's `variables` parameter, and the Parameters f read as the user's code names them
(items 32-37)."""

from __future__ import annotations

import contextlib
import inspect
import types
from collections.abc import Callable
from typing import Any

import torch

from ._errors import PREFIX, CustomGradientTypeError, describe, fn_name, plural
from ._torch_internals import run_while_tracing

_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


def check_accepts(
    f: Callable[..., Any], bound: Any, grad_fn: Callable[..., Any], variables: list[Any]
) -> None:
    """Raise unless grad_fn can take the variables f read (item 33)."""
    if variables and not accepts_variables(grad_fn):
        raise CustomGradientTypeError(
            f"{PREFIX}grad_fn of {describe(f)} must accept keyword argument 'variables', since "
            f"function uses variables: {fn_name(f)} reads {plural(len(variables), 'trainable Parameter')} "
            f"that it is not passed ({parameter_names(variables, f, bound)}). Define "
            "`def grad_fn(*upstream, variables=None)` and return `(input_grads, [one gradient "
            "per variable])`, or pass the Parameters as positional arguments."
        ) from None


def accepts_variables(grad_fn: Callable[..., Any]) -> bool:
    """Whether grad_fn can be called with `variables=` (item 33)."""
    read = code_accepts_variables(type(grad_fn), getattr(grad_fn, "__code__", None))
    if read is not None:
        return read
    try:
        parameters = inspect.signature(grad_fn).parameters.values()
    except (TypeError, ValueError):
        return True  # unreadable signature: let the call itself tell
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == "variables" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        for p in parameters
    )


@run_while_tracing
def code_accepts_variables(kind: type, code: Any) -> bool | None:
    """Whether a grad_fn of this class and code can be called with `variables=` (item 33), or
    None where its code does not tell (not a plain function). Run as Python while Dynamo traces
    (Note [compile guards] in `_compile.py`): traced, its reads were six guards."""
    if kind is not types.FunctionType or code is None:
        return None
    if code.co_flags & _CO_VARKEYWORDS:
        return True
    first, last = code.co_posonlyargcount, code.co_argcount + code.co_kwonlyargcount
    return "variables" in code.co_varnames[first:last]


def parameter_names(variables: list[torch.nn.Parameter], f: Callable[..., Any], bound: Any) -> str:
    """Name Parameters the way the user's code reaches them: `self.weight`, `w`, or by shape."""
    known: dict[int, str] = {}
    if isinstance(bound, torch.nn.Module):
        known.update((id(p), f"self.{name}") for name, p in bound.named_parameters())
    if isinstance(f, types.FunctionType) and f.__closure__:
        for name, cell in zip(f.__code__.co_freevars, f.__closure__, strict=True):
            with contextlib.suppress(ValueError):  # an empty cell
                known.setdefault(id(cell.cell_contents), name)
    for name, value in getattr(f, "__globals__", {}).items():
        if isinstance(value, torch.nn.Parameter):
            known.setdefault(id(value), name)
    return ", ".join(
        f"`{known[id(v)]}`" if id(v) in known else f"a Parameter of shape {list(v.shape)}"
        for v in variables
    )
