"""Checking a ported custom gradient: `check(fn, *example_args)` and what it returns.

`check` runs a decorated function on example inputs and reports, one row per check, whether its
gradient is right and whether it survives what training code does to it: loss scaling and gradient
accumulation, `torch.func`, `torch.compile`, autocast, `torch.no_grad()`, in-place edits and freeing
memory. `python -m tf_compat_grad check` runs it on every decorated function of a module.

Statuses: FAIL means broken in plain use or silently wrong somewhere (a gradient that is not the
true derivative, unless declared a surrogate; an error in eager mode, a wrong gradient count, NaN
where the true derivative is finite, a gradient that changes between two backward passes or under
a transform, a leak); WARN means it works but something deserves a look (a grad_fn that is not
linear in the upstream, an example element on a kink or jump where finite differences are no
derivative, a transform or `fullgraph=True` that refuses it loudly); SKIP means the check does
not apply (for instance no floating-point input). `strict=True` turns every WARN into a FAIL.

A gradient that differs from the true derivative on purpose (a straight-through estimator, a
clipped or reversed gradient) is declared with `@custom_gradient(surrogate="why")` or
`check(fn, ..., surrogate="why")`: the checker then reports the difference with that reason and
does not fail for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The doctest of `check` compiles a function it defines in this module's namespace, and Dynamo
# looks that function's globals (`torch`) up on the module itself.
import torch  # noqa: F401

from ._checker.report import CHECKS, Example, Report, Row, Status
from ._checker.runner import run_checks
from ._checker.subject import decorated
from ._exit_status import ExitStatus

__all__ = ["CHECKS", "Example", "ExitStatus", "Report", "Row", "Status", "check", "run_checks"]


def check(
    fn: Callable[..., Any],
    *example_args: Any,
    strict: bool = False,
    surrogate: str | None = None,
    **example_kwargs: Any,
) -> Report:
    """Check a custom gradient on example inputs; one row per check of `CHECKS`.

    With no example arguments, the example attached with `custom_gradient(example=...)` is used. (To
    pass fn keyword arguments named `strict` or `surrogate`, give the example as an `Example` to
    `run_checks`.) Floating-point inputs are cast to float64 for the numerical checks (and to
    float32 for autocast); the arguments given are never modified.

    The checks call `torch._dynamo.reset()` before compiling (Dynamo's caches are per code
    object, and every decorated function shares the wrapper's), so run `check` apart from
    compiled code you are timing.

    Args:
        fn: a `custom_gradient` function, a method of an instance, or any callable made of
            them.
        *example_args: its positional arguments (the inputs that get gradients).
        strict: turn every WARN into a FAIL.
        surrogate: why fn's gradient deliberately differs from the true derivative, as
            `custom_gradient(surrogate=...)` declares it (this one wins).
        **example_kwargs: its keyword arguments.

    Returns:
        A `Report`: print it for a table, `report.ok` is True when nothing failed,
        `report["vmap"]` is one `Row`, `report.to_dict()` is JSON-ready.

    Raises:
        TypeError: no example arguments were given and `fn` has none attached.

    Example:
        >>> import torch
        >>> from tf_compat_grad import custom_gradient
        >>> from tf_compat_grad.testing import check
        >>> @custom_gradient
        ... def log1pexp(x):
        ...     e = torch.exp(x)
        ...     def grad(upstream):
        ...         return upstream * (1 - 1 / (1 + e))
        ...     return torch.log(1 + e), grad
        >>> report = check(log1pexp, torch.tensor([-2.0, 0.5, 3.0]))
        >>> report.ok
        True
        >>> print(report["numerical"].status.value, report["numerical"].reason)
        PASS matches the true derivative (finite differences)
    """
    if not example_args and not example_kwargs:
        example = getattr(fn, "example", None)
        if example is None:
            example = getattr(decorated(fn), "example", None)
        if example is None:
            raise TypeError(
                f"tf_compat_grad: check() needs example inputs for {fn!r}: pass them, as in "
                "`check(fn, torch.randn(3))`, or attach them with "
                "`@custom_gradient(example=lambda: (torch.randn(3),))`"
            )
        return run_checks(fn, example, strict=strict, surrogate=surrogate)
    return run_checks(
        fn, Example(*example_args, **example_kwargs), strict=strict, surrogate=surrogate
    )
