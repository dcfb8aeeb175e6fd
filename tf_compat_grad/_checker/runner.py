"""The individual checks behind `tf_compat_grad.testing.check`.

Each check takes a `_Subject` (`subject.py`: the function, its example, what the forward found) and
returns a `Row`. Every check makes its own fresh copies of the example inputs, so no check sees
another's gradients or in-place edits, and runs with the random-number state forked and seeded, so a
random f draws the same numbers each time and the caller's state is left alone.

# Note [statuses]
FAIL is kept for what breaks plain training or is silently wrong: a gradient that is not the
true derivative where finite differences and autodiff of f agree on it, away from kinks (unless
declared a surrogate: Note [surrogates] in `finite_difference_checks.py`), an error in eager
mode or under autocast or `no_grad`, a wrong gradient count, NaN where the reference is finite,
results that change between two backward passes or under a transform, a stale gradient after an
in-place edit, a leak. A transform or `fullgraph=True` that *refuses* the function with an error
is a WARN: it is loud, optional, and the reason says what to change. So is a grad_fn that is not
linear in the upstream, and an example point on a kink or jump where finite differences are no
derivative (Note [kinks]): the rest is still compared there. `strict=True` turns every WARN
into a FAIL, for CI that wants none.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from .finite_difference_checks import _check_numerical, _check_second_order
from .gradient_checks import (
    _check_autodiff,
    _check_determinism,
    _check_forward,
    _check_gradients,
    _check_linearity,
    _gradient_skip,
)
from .numerics import FAIL, SKIP, WARN, _first_line, _seeded
from .report import CHECKS, Report, Row
from .subject import _Subject, function_name, location, resolve_example
from .torch_checks import (
    _check_autocast,
    _check_compile,
    _check_inplace,
    _check_memory,
    _check_no_grad,
)
from .torch_func_checks import _check_func_grad, _check_vmap, _transform_skip

# The checks that need a gradient, all after `gradients` but `no_grad`: skipped when the forward
# or `gradients` fails.
_NEEDS_GRADIENT = frozenset(CHECKS) - {"forward", "gradients", "no_grad"}


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


def run_checks(
    fn: Callable[..., Any],
    example: Any,
    *,
    only: Iterable[str] | None = None,
    name: str | None = None,
    progress: Callable[[str], None] | None = None,
    surrogate: str | None = None,
    strict: bool = False,
) -> Report:
    """`check` with the example given as an `Example`, a tuple of positional arguments or a
    function of no arguments returning either, and with options.

    Args:
        fn: the function to check.
        example: its example inputs.
        only: the names of the checks to run (see `CHECKS`); all when None.
        name: the function's name in the report (by default its qualified name).
        progress: called with each check's name before it runs.
        surrogate: why the gradient deliberately differs from the true derivative (see
            `check`).
        strict: turn every WARN into a FAIL.

    Returns:
        A `Report` with one row per check run.

    Raises:
        ValueError: `only` names an unknown check.
    """
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
    subject = _Subject(fn, resolved, surrogate)
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
    if strict:
        for row in rows:
            if row.status is WARN:
                row.status, row.reason = FAIL, f"{row.reason} (a WARN, failed by strict mode)"
    return Report(title, location(fn), repr(resolved), rows, subject.surrogate, strict)
