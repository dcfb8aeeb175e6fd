"""docs/port.md, the user page of `python -m tf_compat_grad port`, is what the port does: each
TensorFlow source block (```python tensorflow NAME) ports to the blocks that follow it (the
code, the report, the first lines), and the coverage it states is the table's. Its Python blocks
run, and print what the page says, in tests/test_docs.py with every page's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from tf_compat_grad._port._table import coverage
from tf_compat_grad.port import port_source

DOC = Path(__file__).resolve().parent.parent / "docs" / "port.md"
BLOCK = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[list[str], str]]:
    return [(m["info"].split(), m["body"]) for m in BLOCK.finditer(DOC.read_text("utf-8"))]


def test_tensorflow_blocks_port_to_the_blocks_that_follow() -> None:
    found = blocks()
    checked = 0
    for index, (info, body) in enumerate(found):
        if info[:2] != ["python", "tensorflow"]:
            continue
        result = port_source(body, info[2])
        for position, (after_info, after) in enumerate(found[index + 1 :]):
            if after_info == ["python"] and position == 0:  # the code, right after its source
                assert after == result.code
            elif after_info == ["text", "report", info[2]]:
                assert after == result.text(info[2]) + "\n"
            elif after_info == ["text", "head", info[2]]:
                assert result.code.startswith(after)
            else:
                break
            checked += 1
    assert checked >= 4


def test_the_coverage_stated_is_the_tables() -> None:
    translated, total = coverage()
    text = " ".join(DOC.read_text("utf-8").split())
    share = round(100 * len(translated) / total)
    assert f"(**{total}** functions" in text
    assert f"**{len(translated)} ({share}%)** translate by name" in text
