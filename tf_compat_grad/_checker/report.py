"""What the checker reports: `Example` inputs, one `Row` per check with its `Status`, and the
`Report` of one function. Re-exported by `tf_compat_grad.testing`."""

from __future__ import annotations

import dataclasses
import enum
import io
from collections.abc import Iterator
from typing import Any

import torch

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


@dataclasses.dataclass(eq=False, repr=False, slots=True)
class Row:
    """One check's outcome: its name, status, a one-line reason and the measured figure.

    `value` is the figure as a number (a maximum difference, a count) when there is one.
    """

    check: str
    status: Status
    reason: str
    figure: str = ""
    value: float | None = None
    seconds: float = 0.0

    def __repr__(self) -> str:
        return f"Row({self.check!r}, {self.status.value}, {self.reason!r}, {self.figure!r})"

    def __str__(self) -> str:
        figure = f"  [{self.figure}]" if self.figure else ""
        return f"{self.status.value}  {self.check:<13} {self.reason}{figure}"

    def to_dict(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        return {**fields, "status": self.status.value, "seconds": round(self.seconds, 3)}


@dataclasses.dataclass(eq=False, repr=False)
class Report:
    """What `check` found for one function: one `Row` per check, in the order of `CHECKS`.

    Print it for a table; `report["linearity"]` is one row; `to_dict()` is JSON-ready.
    """

    function: str
    location: str
    example: str
    rows: list[Row]
    surrogate: str | None = None  # why the gradient differs on purpose, where declared
    strict: bool = False  # whether WARN was turned into FAIL

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
            "surrogate": self.surrogate,
            "strict": self.strict,
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
        if self.surrogate:
            out.write(f"  declared surrogate: {self.surrogate}\n")
        for row in self.rows:
            out.write(f"  {row}\n")
        return out.getvalue().rstrip("\n")
