"""`python -m tf_compat_grad [check [TARGET ...] [--json FILE] [--only NAME]]`.

The exit statuses and the JSON are checked in fresh processes (`sys.executable -m
tf_compat_grad`), as a user runs them; the finer points of the output in-process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from tf_compat_grad import _cli, custom_gradient
from tf_compat_grad._checker import generated

GOOD = """
import torch
from tf_compat_grad import custom_gradient


@custom_gradient(example=lambda: (torch.randn(4),))
def log1pexp(x):
    e = torch.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return torch.log(1 + e), grad


@custom_gradient
def no_example(x):
    return x * 2, lambda dy: dy * 2


class Layer(torch.nn.Module):
    @custom_gradient(example=lambda: (Layer(), torch.randn(3)))
    def forward(self, x):
        return x * 3, lambda dy: dy * 3
"""

BROKEN = """
import torch
from tf_compat_grad import custom_gradient


@custom_gradient(example=lambda: (torch.randn(4),))
def wrong_count(x):
    return x * 2, lambda dy: (dy * 2, None)


@custom_gradient(example=lambda: (torch.randn(4),))
def fine(x):
    return x * 2, lambda dy: dy * 2
"""


GENERATED = """
import torch
from tf_compat_grad import custom_gradient


@custom_gradient
def hinge(prediction: torch.Tensor, margin: float):
    return (margin - prediction).clamp_min(0), lambda dy: (-dy * (prediction < margin), None)


@custom_gradient
def log_of(x):
    return torch.log(x), lambda dy: dy / x


@custom_gradient
def matmul(a, b):
    return a @ b, lambda dy: (dy @ b.T, a.T @ dy)


@custom_gradient
def takes_a_list(xs: list[torch.Tensor]):
    return xs[0] * 2, lambda dy: [dy * 2]


class Layer(torch.nn.Module):
    @custom_gradient
    def forward(self, x):
        return x * 3, lambda dy: dy * 3
"""

NOTHING_TO_BUILD = """
import torch
from tf_compat_grad import custom_gradient


@custom_gradient
def takes_a_list(xs: list[torch.Tensor]):
    return xs[0] * 2, lambda dy: [dy * 2]


@custom_gradient
def needs_five(x):
    return x.reshape(5) * 2, lambda dy: dy.reshape(x.shape) * 2


class Needs:
    def __init__(self, k):
        self.k = k

    @custom_gradient
    def apply(self, x):
        return x * self.k, lambda dy: dy * self.k
"""


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def _run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tf_compat_grad", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_gallery_in_a_fresh_process() -> None:
    result = _run()
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert out.startswith("== tf_compat_grad.examples: 13 decorated functions, 1 factory ==")
    assert "make_linear_poly (" in out and "no example inputs" in out
    assert "Summary: 13 functions checked in " in out
    assert ", 1 without example inputs (make_linear_poly)" in out
    assert "0 FAIL" in out and out.rstrip().endswith("Result: OK (exit status 0)")
    assert "WARN  linearity     not linear in the upstream gradient" in out
    assert "checking [1/13] log1pexp" in result.stderr  # the progress line


@pytest.mark.slow
def test_failing_target_exits_1_and_writes_json(tmp_path: Path) -> None:
    target = _write(tmp_path, "broken_grads.py", BROKEN)
    report = tmp_path / "report.json"
    result = _run("check", str(target), "--json", str(report), "--only", "forward,gradients")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL  gradients     backward raises CustomGradientValueError" in result.stdout
    assert "Result: FAIL (exit status 1)" in result.stdout
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["targets"] == [str(target)]
    assert data["checks"] == ["forward", "gradients"]
    assert data["summary"]["exit_status"] == 1
    assert data["summary"]["failing"] == ["wrong_count"]
    assert data["summary"]["counts"] == {"PASS": 3, "WARN": 0, "FAIL": 1, "SKIP": 0}
    first = data["functions"][0]
    assert first["function"] == "wrong_count" and first["checked"] is True and first["ok"] is False
    assert first["checks"][1]["status"] == "FAIL"


@pytest.mark.slow
def test_target_that_does_not_import_exits_2() -> None:
    result = _run("check", "no_such_module_for_tf_compat_grad")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith(
        "tf_compat_grad: error: cannot import no_such_module_for_tf_compat_grad: "
        "ModuleNotFoundError: No module named 'no_such_module_for_tf_compat_grad'"
    )


def test_good_module_by_name_lists_every_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "good_grads.py", GOOD)
    monkeypatch.syspath_prepend(str(tmp_path))
    status = _cli.main(["check", "good_grads", "--only", "forward,numerical,linearity"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "== good_grads: 3 decorated functions ==" in out
    assert "log1pexp (" in out and "Layer.forward (" in out
    assert (
        "no_example (" in out
        and "  example: Example(<tensor [4] float64>), generated from the signature (seed 0)\n"
        in out
    )
    assert "Summary: 3 functions checked in" in out
    assert "(1 on generated inputs: no_example)" in out and "without example inputs" not in out


def test_only_a_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = _write(tmp_path, "broken_only.py", BROKEN)
    status = _cli.main(["check", str(target), "--only", "fine", "--only", "gradients"])
    out = capsys.readouterr().out
    assert status == 0
    assert "wrong_count" not in out
    assert "PASS  gradients" in out and "numerical" not in out


def test_json_to_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = _write(tmp_path, "broken_stdout.py", BROKEN)
    status = _cli.main([str(target), "--only", "fine,forward", "--json", "-"])
    captured = capsys.readouterr()
    assert status == 0
    data = json.loads(captured.out)  # the table went to stderr
    assert [f["function"] for f in data["functions"]] == ["fine"]
    assert "Summary:" in captured.err


@pytest.mark.parametrize(
    ("source", "args", "message"),
    [
        pytest.param(
            "import torch\nx = 1\n", (), "defines no decorated function", id="nothing-decorated"
        ),
        pytest.param("def f(:\n", (), "cannot import", id="syntax-error"),
        pytest.param("raise RuntimeError('boom')\n", (), "RuntimeError: boom", id="raises"),
        pytest.param(
            BROKEN, ("--only", "speed"), "--only speed: neither a check", id="unknown-only"
        ),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    args: tuple[str, ...],
    message: str,
) -> None:
    target = _write(tmp_path, f"target_{abs(hash(source))}.py", source)
    assert _cli.main(["check", str(target), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tf_compat_grad: error: ") and message in err


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["check", str(tmp_path / "absent.py")]) == 2
    assert "absent.py: no such file" in capsys.readouterr().err


# --- functions without example inputs -----------------------------------------------------


def test_functions_without_example_get_generated_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = _write(tmp_path, "generated_grads.py", GENERATED)
    report = tmp_path / "report.json"
    status = _cli.main(
        ["check", str(target), "--only", "forward,gradients,numerical", "--json", str(report)]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    generated = "generated from the signature (seed 0"
    assert f"  example: Example(<tensor [4] float64>, 0.186), {generated})\n" in out  # a float
    assert f"  example: Example(<tensor [4] float64>), {generated}, positive values)\n" in out
    assert (
        f"  example: Example(<tensor [3, 3] float64>, <tensor [3, 3] float64>), {generated})\n"
        in out
    )
    assert f"  example: Example(Layer(), <tensor [4] float64>), {generated})\n" in out
    assert (
        "takes_a_list (" in out
        and "no example inputs\n  none could be built: parameter `xs` is annotated "
        "`list[torch.Tensor]`, which has no generated value (only tensors, float and int have). "
        "To check it, add `@custom_gradient(example="
        in out
    )
    assert (
        "Summary: 4 functions checked in" in out
        and "(4 on generated inputs: hinge, log_of, matmul, Layer.forward), 1 without example "
        "inputs (takes_a_list)"
        in out
    )
    assert "0 WARN, 0 FAIL, 0 SKIP" in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["summary"]["generated_example_inputs"] == [
        "hinge",
        "log_of",
        "matmul",
        "Layer.forward",
    ]
    assert data["summary"]["without_example_inputs"] == ["takes_a_list"]
    assert [f.get("generated_example") for f in data["functions"]] == [True] * 3 + [None, True]


@pytest.mark.slow
def test_nothing_to_check_is_not_ok(tmp_path: Path) -> None:
    target = _write(tmp_path, "nothing_to_build.py", NOTHING_TO_BUILD)
    report = tmp_path / "report.json"
    result = _run("check", str(target), "--json", str(report))
    assert result.returncode == 3, result.stdout + result.stderr
    out = result.stdout
    assert "Summary: 0 functions checked in " in out
    assert out.rstrip().endswith(
        "Result: NOTHING CHECKED (exit status 3): no function has example inputs, and none "
        "could be built (see above)"
    )
    assert "none could be built: parameter `xs` is annotated `list[torch.Tensor]`" in out
    assert (
        "none could be built: the forward raises on every generated input (shape [4]: "
        "RuntimeError: shape '[5]' is invalid for input of size 4; shape [3, 3]: " in out
    )
    assert "none could be built: a method of `Needs`, and `Needs()` raises TypeError: " in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["summary"]["exit_status"] == 3
    assert data["summary"]["without_example_inputs"] == [
        "takes_a_list",
        "needs_five",
        "Needs.apply",
    ]


@custom_gradient
def mixed(
    x: torch.Tensor, n: int, *rest: float, scale: float, bias: float = 0.5
) -> tuple[torch.Tensor, Any]:
    return x * scale * n + bias, lambda dy: (dy * scale * n, None)


def test_generated_values_are_reproducible_and_off_the_kinks() -> None:
    first, what = generated.build(mixed)
    again, _ = generated.build(mixed)
    assert what == "generated from the signature (seed 0)"
    x, n = first.args
    assert n == 1 and list(first.kwargs) == ["scale"]  # `bias` keeps its default
    assert torch.equal(x, again.args[0]) and first.kwargs == again.kwargs
    assert x.dtype == torch.float64 and x.shape == (4,)
    assert bool((x < 0).any()) and bool((x > 0).any())
    for value in [*x.tolist(), first.kwargs["scale"]]:
        assert abs(2 * value - round(2 * value)) >= 0.2 - 1e-9, value  # 0.1 from k / 2
