"""The checker's mutation score: every correct custom gradient of `mutant_functions.py` passes,
and every mutant of one (a sign, a missing factor or term, a transposed matrix, a wrong axis,
...) fails. README.md and docs/checker.md report the score; `test_the_docs_report_the_score` keeps it true."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import mutant_functions as M
import pytest
import torch

from tf_compat_grad.__main__ import main
from tf_compat_grad.testing import Example, Status, check, run_checks

ROOT = Path(__file__).resolve().parents[1]
# The checks of the gradient itself (the rest cost seconds a function: run at full in `slow`).
GRADIENT_CHECKS = ["forward", "gradients", "numerical", "autodiff", "linearity", "second_order"]


def _name(fn: Any) -> str:
    return str(fn.__name__)


@pytest.mark.parametrize("fn", M.CORRECT, ids=_name)
def test_correct_gradient_passes(fn: Any) -> None:
    report = run_checks(fn, fn.example, only=GRADIENT_CHECKS)
    assert [r.status for r in report] == [Status.PASS] * len(GRADIENT_CHECKS), report


@pytest.mark.parametrize("fn", list(M.MUTANTS), ids=_name)
def test_mutant_fails(fn: Any) -> None:
    report = run_checks(fn, fn.example, only=GRADIENT_CHECKS)
    assert "numerical" in report.failed, report
    reason = report["numerical"].reason
    assert re.match(r"the custom gradient is not the true derivative at \d+ element", reason)
    assert reason.endswith('declare it: `@custom_gradient(surrogate="why")`'), reason


# Past 64 input elements the checker compares along random directions.
LARGE = [M.softmax, M.log_softmax, M.logsumexp, M.standardize, M.row_mean]


@pytest.mark.parametrize(
    "fn",
    [f for f in M.MUTANTS if any(f.__name__.startswith(g.__name__ + "_") for g in LARGE)] + LARGE,
    ids=_name,
)
def test_on_a_large_input(fn: Any) -> None:
    x = torch.randn(12, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    row = run_checks(fn, Example(x), only=["numerical"])["numerical"]
    assert "along 12 random directions" in row.reason or "12 random direction(s)" in row.reason
    assert row.status is (Status.PASS if fn in LARGE else Status.FAIL), row


@pytest.mark.slow
@pytest.mark.parametrize("fn", M.CORRECT, ids=_name)
def test_correct_gradient_passes_every_check(fn: Any) -> None:
    report = check(fn)
    assert report.ok and not report.warned, report


@pytest.mark.slow
@pytest.mark.parametrize("fn", list(M.MUTANTS), ids=_name)
def test_mutant_fails_check(fn: Any) -> None:
    assert not check(fn).ok


def test_the_mutants_cover_the_kinds_of_bug() -> None:
    kinds = set(M.MUTANTS.values())
    assert {
        "sign",
        "missing factor",
        "missing term",
        "transposed matrix",
        "wrong axis",
        "output used for input",
        "upstream not multiplied",
        "gradients of two inputs swapped",
        "wrong constant",
    } <= kinds
    assert len(M.CORRECT) >= 15 and len(M.MUTANTS) >= 40


@pytest.mark.parametrize("page", ["README.md", "docs/checker.md"])
def test_the_docs_report_the_score(page: str) -> None:
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    n, k = len(M.MUTANTS), len(M.CORRECT)
    assert f"all {k} correct custom gradients pass and {n} of {n} mutants fail" in text


@pytest.mark.slow
def test_the_command_line_fails_the_mutants_of_a_sample(capsys: pytest.CaptureFixture[str]) -> None:
    sample = ["log1pexp", "log1pexp_sign", "softmax_missing_term", "matmul_gradients_swapped"]
    target = str(ROOT / "tests" / "mutant_functions.py")
    status = main(["check", target, "--only", ",".join(sample), "--json", "-"])
    data = json.loads(capsys.readouterr().out)
    assert status == 1
    assert data["summary"]["failing"] == sample[1:]
    assert [f["function"] for f in data["functions"] if f["ok"]] == ["log1pexp"]
