"""docs/checker.md runs as written: each ```python block in order, in one namespace, and what
it prints is the ```text block that follows it."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "checker.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def test_the_page_has_snippets_each_with_its_output() -> None:
    blocks = _blocks()
    python = [i for i, (kind, _) in enumerate(blocks) if kind == "python"]
    assert len(python) >= 4
    assert all(i + 1 < len(blocks) and blocks[i + 1][0] == "text" for i in python)


@pytest.mark.slow
def test_the_snippets_print_what_the_page_shows(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module of its own, as a user's script is: Dynamo looks f's globals up on it.
    module = types.ModuleType("checker_md")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    blocks = _blocks()
    for i, (kind, code) in enumerate(blocks):
        if kind != "python":
            continue
        exec(compile(code, f"{DOC}: block {i}", "exec"), module.__dict__)
        assert capsys.readouterr().out == blocks[i + 1][1], f"block {i}:\n{code}"
