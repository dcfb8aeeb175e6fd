"""Checking a ported custom gradient: `check(fn, *example_args)` and what it returns.

`check` runs a decorated function on example inputs and reports, one row per check, whether its
gradient is right and whether it survives what training code does to it: loss scaling and
gradient accumulation, `torch.func`, `torch.compile`, autocast, `torch.no_grad()`, in-place edits
and freeing memory. `python -m tf_compat_grad check` runs it on every decorated function of a
module.

Statuses: FAIL means broken in plain use or silently wrong somewhere (an error in eager mode, a
wrong gradient count, NaN where the true derivative is finite, a gradient that changes between two
backward passes or under a transform, a leak); WARN means it works but something deserves a look
(a gradient that deliberately differs from the true derivative, a grad_fn that is not linear in
the upstream, an example element on a kink or jump where finite differences are no derivative, a
transform or `fullgraph=True` that refuses it loudly); SKIP means the check does
not apply (for instance no floating-point input).
"""

from __future__ import annotations

import enum
import io
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

__all__ = ["CHECKS", "Example", "Report", "Row", "Status", "check", "run_checks"]

# The checks in the order they run: name, and what a PASS means.
CHECKS: dict[str, str] = {
    "forward": "the forward runs and returns tensors",
    "gradients": "grad_fn returns one gradient per input, of the input's shape and dtype",
    "numerical": "the custom gradient against float64 finite differences",
    "autodiff": "the custom gradient against autodiff of f's own ops",
    "linearity": "grad_fn is linear in the upstream gradient",
    "determinism": "two backward passes give the same gradient",
    "second_order": "double backward against finite differences of the gradient",
    "func_grad": "torch.func.grad gives the eager gradient",
    "vmap": "torch.func.vmap over a batch gives the per-sample results",
    "compile": "torch.compile(fullgraph=True): values, gradients, graph breaks",
    "autocast": "autocast to bfloat16 on CPU: forward and backward",
    "no_grad": "under torch.no_grad() the forward gives the same outputs",
    "inplace": "an in-place edit of an input after forward is detected",
    "memory": "nothing is kept alive after backward",
}


class Example:
    """Example inputs for a decorated function: positional and keyword arguments.

    Pass it as `custom_gradient(example=...)` (or a function of no arguments returning one),
    when the example needs keyword arguments; a function returning a tuple of positional
    arguments is enough otherwise.

    Example:
        >>> import torch
        >>> Example(torch.ones(3), alpha=2.0).kwargs
        {'alpha': 2.0}
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        parts = [_short(a) for a in self.args] + [
            f"{k}={_short(v)}" for k, v in self.kwargs.items()
        ]
        return f"Example({', '.join(parts)})"


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"<tensor {list(value.shape)} {str(value.dtype).replace('torch.', '')}>"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Status(str, enum.Enum):
    """The outcome of one check."""

    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    SKIP = "SKIP"


class Row:
    """One check's outcome: its name, status, a one-line reason and the measured figure.

    `value` is the figure as a number (a maximum difference, a count) when there is one.
    """

    __slots__ = ("check", "figure", "reason", "seconds", "status", "value")

    def __init__(
        self,
        check: str,
        status: Status,
        reason: str,
        figure: str = "",
        value: float | None = None,
        seconds: float = 0.0,
    ) -> None:
        self.check = check
        self.status = status
        self.reason = reason
        self.figure = figure
        self.value = value
        self.seconds = seconds

    def __repr__(self) -> str:
        return f"Row({self.check!r}, {self.status.value}, {self.reason!r}, {self.figure!r})"

    def __str__(self) -> str:
        figure = f"  [{self.figure}]" if self.figure else ""
        return f"{self.status.value}  {self.check:<13} {self.reason}{figure}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "status": self.status.value,
            "reason": self.reason,
            "figure": self.figure,
            "value": self.value,
            "seconds": round(self.seconds, 3),
        }


class Report:
    """What `check` found for one function: one `Row` per check, in the order of `CHECKS`.

    Print it for a table; `report["linearity"]` is one row; `to_dict()` is JSON-ready.
    """

    def __init__(self, function: str, location: str, example: str, rows: list[Row]) -> None:
        self.function = function
        self.location = location
        self.example = example
        self.rows = rows

    def __getitem__(self, check: str) -> Row:
        for row in self.rows:
            if row.check == check:
                return row
        raise KeyError(f"no check {check!r} in this report; it has {[r.check for r in self.rows]}")

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def ok(self) -> bool:
        """No check failed."""
        return not self.failed

    @property
    def failed(self) -> list[str]:
        """The names of the checks that failed."""
        return [r.check for r in self.rows if r.status is Status.FAIL]

    @property
    def warned(self) -> list[str]:
        """The names of the checks that warned."""
        return [r.check for r in self.rows if r.status is Status.WARN]

    def counts(self) -> dict[str, int]:
        """How many rows have each status, e.g. `{'PASS': 12, 'WARN': 1, 'FAIL': 0, 'SKIP': 1}`."""
        return {s.value: sum(r.status is s for r in self.rows) for s in Status}

    def to_dict(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "location": self.location,
            "example": self.example,
            "ok": self.ok,
            "counts": self.counts(),
            "checks": [r.to_dict() for r in self.rows],
        }

    def __repr__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        return f"<Report {self.function}: {counts}>"

    def __str__(self) -> str:
        out = io.StringIO()
        where = f" ({self.location})" if self.location else ""
        counts = "  ".join(f"{n} {s}" for s, n in self.counts().items() if n)
        out.write(f"{self.function}{where}  {counts}\n")
        if self.example:
            out.write(f"  example: {self.example}\n")
        for row in self.rows:
            out.write(f"  {row}\n")
        return out.getvalue().rstrip("\n")


def check(fn: Callable[..., Any], *example_args: Any, **example_kwargs: Any) -> Report:
    """Check a custom gradient on example inputs; one row per check of `CHECKS`.

    With no example arguments, the example attached with `custom_gradient(example=...)` is
    used. Floating-point inputs are cast to float64 for the numerical checks (and to float32
    for autocast); the arguments given are never modified.

    The checks call `torch._dynamo.reset()` before compiling (Dynamo's caches are per code
    object, and every decorated function shares the wrapper's), so run `check` apart from
    compiled code you are timing.

    Args:
        fn: a `custom_gradient` function, a method of an instance, or any callable made of
            them.
        *example_args: its positional arguments (the inputs that get gradients).
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
            cg = getattr(getattr(fn, "__func__", fn), "__tf_compat_grad__", None)
            example = getattr(cg, "example", None)
        if example is None:
            raise TypeError(
                f"tf_compat_grad: check() needs example inputs for {fn!r}: pass them, as in "
                "`check(fn, torch.randn(3))`, or attach them with "
                "`@custom_gradient(example=lambda: (torch.randn(3),))`"
            )
        return run_checks(fn, example)
    return run_checks(fn, Example(*example_args, **example_kwargs))


def run_checks(
    fn: Callable[..., Any],
    example: Any,
    *,
    only: Iterable[str] | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Report:
    """`check` with the example given as an `Example`, a tuple of positional arguments or a
    function of no arguments returning either, and with options.

    Args:
        fn: the function to check.
        example: its example inputs.
        only: the names of the checks to run (see `CHECKS`); all when None.
        name: the function's name in the report (by default its qualified name).
        progress: called with each check's name before it runs.

    Returns:
        A `Report` with one row per check run.

    Raises:
        ValueError: `only` names an unknown check.
    """
    from ._checks import run

    return run(fn, example, only=only, name=name, progress=progress)
