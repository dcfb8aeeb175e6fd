"""`python -m tf_compat_grad [check [TARGET ...] [--json FILE] [--only NAME]]`.

The exit statuses and the JSON are checked in fresh processes (`sys.executable -m
tf_compat_grad`), as a user runs them; the finer points of the output in-process.
"""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

import tf_compat_grad
from tf_compat_grad import _cli, custom_gradient, examples
from tf_compat_grad._checker import console, generated, plot
from tf_compat_grad.testing import ExitStatus

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
    assert "0 FAIL" in out
    assert out.rstrip().splitlines()[-1] == (
        "Result: OK (exit status 0): no gradient is wrong; 3 functions have warnings worth "
        "reading (WARN rows above), which do not fail the run (--strict makes them fail)."
    )
    assert (
        "  declared surrogates (their gradient differs from the true derivative on purpose): "
        "clip_gradient_by_norm, linear_poly, custom_relu, squared_loss, custom_exp, "
        "smooth_round, straight_through_round\n"
    ) in out
    assert "This was the bundled gallery (tf_compat_grad.examples)" in out
    assert "Check your own code with `python -m tf_compat_grad check your_module.py`." in out
    assert "WARN  linearity     not linear in the upstream gradient" in out
    # The WARN rows (a function's header also says "1 WARN  1 SKIP" where compile is skipped).
    warn_rows = [line for line in out.splitlines() if line.startswith("  WARN  ")]
    assert len(warn_rows) == 3 and "WARN  vmap" not in out
    assert all("as declared: surrogate" in line for line in _lines_with(out, "deliberately"))
    assert "checking [1/13] log1pexp" in result.stderr  # the progress line
    assert "NumPy" not in result.stderr and "Warning" not in result.stderr


def _lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


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
        "python -m tf_compat_grad: error: cannot import no_such_module_for_tf_compat_grad: "
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
    assert data["schema_version"] == _cli.SCHEMA_VERSION == 1
    # docs/checker.md ("JSON") names every key
    schema = (Path(__file__).resolve().parents[1] / "docs" / "checker.md").read_text()
    schema = schema[schema.index("## JSON") : schema.index("## Colour")]
    function = data["functions"][0]
    for key in [*data, *data["summary"], *function, *function["checks"][0]]:
        assert f"`{key}`" in schema, key
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
    assert err.startswith("python -m tf_compat_grad: error: ") and message in err


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


# --- command-line conventions -------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        _cli.main([flag])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == (
        f"tf-compat-grad {tf_compat_grad.__version__} (torch {torch.__version__}, Python "
        f"{sys.version.split()[0]})\n"
    )


@pytest.mark.parametrize(
    ("argv0", "prog"),
    [
        pytest.param("/venv/bin/tf-compat-grad", "tf-compat-grad", id="script"),
        pytest.param("C:\\venv\\Scripts\\tf-compat-grad.exe", "tf-compat-grad", id="windows"),
        pytest.param("/src/tf_compat_grad/__main__.py", "python -m tf_compat_grad", id="-m"),
    ],
)
def test_usage_names_the_program_as_it_was_run(
    argv0: str, prog: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", [argv0.replace("\\", "/") if "C:" not in argv0 else argv0])
    if "C:" in argv0 and sys.platform != "win32":
        monkeypatch.setattr(sys, "argv", ["tf-compat-grad.exe"])
    with pytest.raises(SystemExit):
        _cli.main(["check", "--help"])
    assert capsys.readouterr().out.startswith(f"usage: {prog} check [-h]")
    assert _cli.main(["check", "no_such_module_for_tf_compat_grad"]) == ExitStatus.USAGE
    assert capsys.readouterr().err.startswith(f"{prog}: error: cannot import")


def test_exit_statuses_are_a_public_enum() -> None:
    assert [(s.name, int(s)) for s in ExitStatus] == [
        ("OK", 0),
        ("FAILED", 1),
        ("USAGE", 2),
        ("NOTHING_CHECKED", 3),
    ]


@pytest.mark.parametrize(
    ("environment", "tty", "colour"),
    [
        pytest.param({}, True, True, id="terminal"),
        pytest.param({}, False, False, id="pipe"),
        pytest.param({"NO_COLOR": "1"}, True, False, id="NO_COLOR"),
        pytest.param({"FORCE_COLOR": "1"}, False, True, id="FORCE_COLOR"),
        pytest.param({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False, id="both"),
        pytest.param({"NO_COLOR": ""}, True, True, id="empty-NO_COLOR"),
        pytest.param({"TERM": "dumb"}, True, False, id="dumb-terminal"),
    ],
)
def test_colour_follows_the_terminal_and_the_environment(
    environment: dict[str, str], tty: bool, colour: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)

    class Stream(io.StringIO):
        def isatty(self) -> bool:
            return tty

    assert console.wants_colour(Stream()) is colour


def test_forced_colour_paints_the_status_words(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert _cli.main(["check", "--only", "custom_relu", "--only", "forward,linearity"]) == 0
    out = capsys.readouterr().out
    assert "  \033[32mPASS\033[0m  forward" in out
    assert "  \033[33mWARN\033[0m  linearity" in out
    assert "Result: \033[1;32mOK\033[0m (exit status 0)" in out
    monkeypatch.setenv("NO_COLOR", "1")
    _cli.main(["check", "--only", "custom_relu", "--only", "forward"])
    assert "\033[" not in capsys.readouterr().out


def test_strict_turns_warnings_into_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = ["--only", "custom_relu", "--only", "linearity"]
    assert _cli.main(["check", *only]) == ExitStatus.OK
    capsys.readouterr()
    report = tmp_path / "strict.json"
    assert _cli.main(["check", *only, "--strict", "--json", str(report)]) == ExitStatus.FAILED
    out = capsys.readouterr().out
    assert "FAIL  linearity     not linear" in out and "(a WARN, failed by strict mode)" in out
    assert "Result: FAIL (exit status 1, --strict: warnings fail)" in out
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["summary"]["strict"] is True and data["functions"][0]["strict"] is True


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--json", "/missing/dir/r.json"],
            "--json /missing/dir/r.json: the directory /missing/dir does not exist; create it "
            "first",
            id="json-no-directory",
        ),
        pytest.param(["--json", "{tmp}"], "--json {tmp}: is a directory", id="json-directory"),
        pytest.param(
            ["--plot", "{tmp}/a_file/plots"],
            "--plot {tmp}/a_file/plots: cannot create the directory",
            id="plot-under-a-file",
            # without the `plot` extra, `--plot` is refused first, for that
            marks=pytest.mark.skipif(
                importlib.util.find_spec("matplotlib") is None, reason="needs matplotlib"
            ),
        ),
    ],
)
def test_an_unwritable_output_is_refused_before_any_check(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("", encoding="utf-8")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert _cli.main(["check", *args]) == ExitStatus.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""  # no check ran
    assert captured.err.startswith(
        "python -m tf_compat_grad: error: " + message.replace("{tmp}", str(tmp_path))
    )


def test_plot_without_matplotlib_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    assert _cli.main(["check", "--plot", str(tmp_path / "plots")]) == ExitStatus.USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "python -m tf_compat_grad: error: --plot needs matplotlib, which is not installed: "
        "pip install 'tf-compat-grad[plot]'\n"
    )


def test_plot_draws_one_picture_per_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    only = ["--only", "my_relu,custom_exp", "--only", "numerical"]
    assert _cli.main(["check", *only, "--plot", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    for name in ("my_relu", "custom_exp"):
        path = tmp_path / "plots" / f"{name}.png"
        assert f"  plot: {path}\n" in out
        assert path.read_bytes().startswith(b"\x89PNG")


def test_the_picture_shows_a_surrogate_and_a_kink() -> None:
    doubled = plot.along_the_line(examples.custom_exp, examples.custom_exp.example)
    for custom, true in zip(doubled["custom"], doubled["true"], strict=True):
        assert custom == pytest.approx(2 * true, rel=1e-5)
    assert doubled["kinks"] == []
    relu = plot.along_the_line(examples.my_relu, torch.tensor([-0.05, 0.02, 0.04]))
    assert len(relu["kinks"]) >= 1
    assert -1.0 <= relu["kinks"][0] <= 1.0
    away = [
        (c, t)
        for k, (c, t) in enumerate(zip(relu["custom"], relu["true"], strict=True))
        if all(abs(relu["t"][k] - kink) > 0.02 for kink in relu["kinks"])
    ]
    assert away and all(c == pytest.approx(t, abs=1e-6) for c, t in away)


HIDE_NUMPY = """
import importlib.abc, runpy, sys

class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "numpy":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Hide())
sys.argv = ["tf-compat-grad", "check", "--only", "log1pexp,forward,numerical"]
runpy.run_module("tf_compat_grad", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_no_numpy_warning_without_numpy() -> None:
    result = subprocess.run(
        [sys.executable, "-W", "default", "-c", HIDE_NUMPY],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Result: OK" in result.stdout
    assert "NumPy" not in result.stderr, result.stderr
