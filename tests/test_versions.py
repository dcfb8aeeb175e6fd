"""The declared versions are the tested ones: pyproject.toml's ranges, the version matrix's rows
(.ci/matrix.py), the support table of docs/supported_versions.md and the ranges the README and
that page state must agree."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = (ROOT / "pyproject.toml").read_text()
README = (ROOT / "README.md").read_text()
SUPPORT_PAGE = (ROOT / "docs" / "supported_versions.md").read_text()


def _load_matrix():
    spec = importlib.util.spec_from_file_location("_ci_matrix", ROOT / ".ci" / "matrix.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


matrix = _load_matrix()


def _minor(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def _torch_ranges() -> list[tuple[tuple[int, int], tuple[int, int], str]]:
    """(lowest, first excluded, environment marker) of each torch requirement."""
    found = re.findall(
        r'"torch>=([\d.]+),<([\d.]+); (python_version [<>=]+ \'[\d.]+\')"', PYPROJECT
    )
    assert found, "pyproject.toml declares torch with a lower and an upper bound per Python"
    return [(_minor(low), _minor(high), marker) for low, high, marker in found]


def _pythons_allowed(marker: str) -> list[str]:
    op, version = re.fullmatch(r"python_version ([<>=]+) '([\d.]+)'", marker).groups()  # type: ignore[union-attr]
    python_range = re.search(r'requires-python = ">=([\d.]+),<([\d.]+)"', PYPROJECT)
    assert python_range, "requires-python has both bounds"
    low, high = (_minor(v)[1] for v in python_range.groups())
    every = [f"3.{minor}" for minor in range(low, high)]
    compare = {
        "<": lambda p: _minor(p) < _minor(version),
        ">=": lambda p: _minor(p) >= _minor(version),
    }
    return [p for p in every if compare[op](p)]


@pytest.mark.parametrize("requirement", _torch_ranges(), ids=lambda r: r[2])
def test_both_ends_of_each_declared_range_are_matrix_rows(requirement):
    low, excluded, marker = requirement
    pythons = _pythons_allowed(marker)
    rows = [(python, _minor(torch)) for python, torch in matrix.ROWS if python in pythons]
    assert {python for python, _ in rows} == set(pythons), f"every Python of {marker} is a row"
    torches = [torch for _, torch in rows]
    assert min(torches) == low, f"the oldest torch declared for {marker} is a matrix row"
    assert max(torches) == (excluded[0], excluded[1] - 1), f"the newest torch for {marker}"
    assert all(low <= torch < excluded for torch in torches), "no row outside the declared range"


def test_ci_runs_the_oldest_and_newest_torch_and_python_313():
    ci_torches = {torch for _, torch in matrix.CI_ROWS}
    torches = sorted({torch for _, torch in matrix.ROWS}, key=_minor)
    assert {torches[0], torches[-1]} <= ci_torches
    assert any(python == "3.13" for python, _ in matrix.CI_ROWS)
    assert "python3 .ci/matrix.py --rows ci" in (ROOT / ".ci" / "run").read_text()


def test_support_table_lists_every_matrix_row():
    start = SUPPORT_PAGE.index(matrix.TABLE_START)
    table = SUPPORT_PAGE[start : SUPPORT_PAGE.index(matrix.TABLE_END)]
    shown = re.findall(r"^\| (3\.\d+)\.\d+ \| (\d+\.\d+\.\d+) \|", table, flags=re.M)
    assert sorted(shown) == sorted(matrix.ROWS), "rerun .ci/matrix.py --json F, then --docs F"


def _stated_ranges() -> str:
    """The sentence that the README and docs/supported_versions.md state, from pyproject.toml."""
    python_low, python_high = re.search(
        r'requires-python = ">=([\d.]+),<([\d.]+)"', PYPROJECT
    ).groups()  # type: ignore[union-attr]
    newest_python = f"3.{_minor(python_high)[1] - 1}"
    ranges = {marker: (low, high) for low, high, marker in _torch_ranges()}
    (older, (low, high)), (newer, (low_new, high_new)) = sorted(ranges.items())
    assert older.startswith("python_version <") and high == high_new
    newest = f"{high[0]}.{high[1] - 1}"
    return (
        f"Python {python_low} to {newest_python} with the torch you already have: torch "
        f"{low[0]}.{low[1]} to {newest} ({low_new[0]}.{low_new[1]} to {newest} on Python "
        f"{newer.split(chr(39))[1]})"
    )


def _words(text: str) -> str:
    return " ".join(text.split())


def test_readme_states_the_declared_ranges():
    assert _stated_ranges() in _words(README)


def test_readme_cpu_install_line_asks_for_the_declared_torch_range():
    (low, high, _), *_ = _torch_ranges()
    assert f'"torch>={low[0]}.{low[1]},<{high[0]}.{high[1]}"' in README


def test_support_page_states_the_declared_ranges():
    stated = _stated_ranges().replace(" with the torch you already have:", " with")
    assert stated in _words(SUPPORT_PAGE)
