"""Every Python snippet of the README and the docs runs, and prints what the page says it prints.

The snippets of one page run in order in one namespace, as a reader pastes them one after the
other. What a `print(...)` line writes is the comment that ends that line
(`print(x.grad)  # tensor(1.)`) or, when it has none, the comment lines right under it; a
snippet followed at once by a `text` fence prints that block instead, whole (the checker's
tables are too wide for comments). A
snippet fenced as `python tensorflow` needs TensorFlow, which the test suite does not install:
it is not run (the translator's tests compare with TensorFlow's recorded numbers instead).
Fences of other languages (`bash`, `text`) are not run either.

The API reference is generated from the public modules' `__all__` and docstrings, so every
public module declares `__all__` and every name in it is documented.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN, TENSORFLOW = "python", "python tensorflow"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<code>.*?)^```[ \t]*$", re.S | re.M)
# Pages whose snippets take seconds (the checker compiles the function it checks).
SLOW = {"docs/checker.md"}
PUBLIC_MODULES = ["tf_compat_grad", "tf_compat_grad.testing", "tf_compat_grad.port"]
PUBLIC_MODULES += ["tf_compat_grad.examples", "tf_compat_grad.tf_ops", "tf_compat_grad.layers"]


@dataclass
class Snippet:
    page: str
    line: int  # the line of the page where the code starts
    info: str
    code: str
    output: str | None = None  # a `text` fence right after it: what it prints

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def snippets(page: Path) -> list[Snippet]:
    text = page.read_text(encoding="utf-8")
    name = page.relative_to(ROOT).as_posix() if page.is_relative_to(ROOT) else page.name
    matches = list(FENCE.finditer(text))
    found = [
        Snippet(name, text.count("\n", 0, m.start("code")) + 1, m["info"].strip(), m["code"])
        for m in matches
    ]
    # A `text` fence right after a snippet (blank lines apart) is what that snippet prints.
    for i in range(len(found) - 1):
        if (
            found[i + 1].info == "text"
            and not text[matches[i].end() : matches[i + 1].start()].strip()
        ):
            found[i].output = found[i + 1].code
    return found


def expected_output(snippet: Snippet) -> list[str]:
    """The lines its prints write: its `text` output block, or the comments after each
    `print(`."""
    if snippet.output is not None:
        return snippet.output.splitlines()
    lines = snippet.code.splitlines()
    expected: list[str] = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("print("):
            continue
        code, _, comment = line.partition("  # ")
        if comment:
            expected.append(comment)
            continue
        following = []
        for after in lines[i + 1 :]:
            if not after.lstrip().startswith("#"):
                break
            following.append(after.lstrip().removeprefix("#").strip())
        assert following, f"{snippet.where}: `{code.strip()}` does not say what it prints"
        expected += following
    return expected


def run_page(page: Path) -> int:
    """Runs the page's Python snippets; returns how many ran."""
    # A module of its own, as a reader's script is: Dynamo looks f's globals up on it.
    module = types.ModuleType("__docs__")
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    try:
        torch.manual_seed(0)
        ran = 0
        for snippet in snippets(page):
            if snippet.info != RUN:
                continue
            # Leading newlines make a traceback's line numbers those of the page.
            code = compile("\n" * (snippet.line - 1) + snippet.code, snippet.page, "exec")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            assert out.getvalue().splitlines() == expected_output(snippet), snippet.where
            ran += 1
        return ran
    finally:
        del sys.modules[module.__name__]


def _page_param(page: Path) -> object:
    name = page.relative_to(ROOT).as_posix()
    return pytest.param(page, id=name, marks=[pytest.mark.slow] if name in SLOW else [])


RUNNABLE = [page for page in PAGES if any(s.info == RUN for s in snippets(page))]


@pytest.mark.parametrize("page", [_page_param(page) for page in RUNNABLE])
def test_snippets_run_and_print_what_the_page_says(page: Path) -> None:
    assert run_page(page) >= 1


def test_python_fences_are_run_or_marked_as_tensorflow() -> None:
    unknown = [
        s.where for page in PAGES for s in snippets(page) if s.info.startswith("py") and
        s.info != RUN and not s.info.startswith(TENSORFLOW)
    ]  # fmt: skip
    assert not unknown, f"fence Python as `{RUN}` (run) or `{TENSORFLOW} ...` (not run): {unknown}"


def test_the_migration_guide_runs_its_torch_snippets_and_marks_the_tensorflow_ones() -> None:
    guide = snippets(ROOT / "docs" / "migrating_from_tensorflow.md")
    run = [s for s in guide if s.info == RUN]
    tensorflow = [s for s in guide if s.info == TENSORFLOW]
    assert len(run) >= 22 and len(tensorflow) >= 10
    assert all(re.search(r"\btf\.", s.code) for s in tensorflow)
    assert not any(re.search(r"\btf\.", s.code) for s in run)
    assert {s.page for s in snippets(ROOT / "README.md") if s.info == RUN} == {"README.md"}


def test_a_wrong_comment_fails_the_snippet(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1 + 1)  # 3\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"page\.md:2"):
        run_page(page)


def test_a_print_must_say_what_it_prints(tmp_path: Path) -> None:
    (tmp_path / "page.md").write_text("```python\nprint(2)\nx = 1\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="does not say what it prints"):
        run_page(tmp_path / "page.md")


def test_output_may_be_the_text_block_right_after(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint('a')\nprint('b')\n```\n\n```text\na\nc\n```\n", "utf-8")
    with pytest.raises(AssertionError, match=r"page\.md:2"):
        run_page(page)
    page.write_text(page.read_text("utf-8").replace("c\n```", "b\n```"), "utf-8")
    assert run_page(page) == 1


def test_the_checker_page_shows_what_each_snippet_prints() -> None:
    page = snippets(ROOT / "docs" / "checker.md")
    run = [s for s in page if s.info == RUN]
    assert len(run) >= 4 and all(s.output is not None for s in run)


def test_output_may_follow_on_comment_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint('a\\nb')\n# a\n# b\n```\n", encoding="utf-8")
    assert run_page(page) == 1


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_modules_declare_all_and_document_it(name: str) -> None:
    module = importlib.import_module(name)
    assert inspect.getdoc(module)
    exported = module.__all__
    assert len(set(exported)) == len(exported) and all(hasattr(module, n) for n in exported)
    for n in exported:
        value = getattr(module, n)
        if inspect.isclass(value) or inspect.isfunction(value) or callable(value):
            assert inspect.getdoc(value), f"{name}.{n} has no docstring"
    imported = {
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and getattr(v, "__module__", name).split(".")[0] != "tf_compat_grad"
    }
    assert not imported & set(exported), f"{name}.__all__ re-exports {imported & set(exported)}"
