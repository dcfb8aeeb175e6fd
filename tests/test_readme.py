"""The README against CI and the package index: the commands it gives are the ones CI runs, its
links are absolute (it is the long description on the package index, where a relative link is
dead) and lead to pages that exist; and the benchmark table of docs/performance.md is generated
from benchmarks/results.json by the benchmark itself (`python3 benchmarks/run.py --docs
benchmarks/results.json`), so it cannot drift."""

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from helpers import links

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
DOCS_URL = "https://tf-compat-grad.github.io/tf-compat-grad/"
REPO_FILE_URL = "https://github.com/tf-compat-grad/tf-compat-grad/blob/main/"


def _report_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))  # _report imports its sibling _cases
    try:
        spec = importlib.util.spec_from_file_location(
            "_bench_report", ROOT / "benchmarks" / "_report.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_docs_benchmark_table_is_generated_from_results_json():
    report = _report_module()
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    start = page.index(report.TABLE_START) + len(report.TABLE_START)
    shown = page[start : page.index(report.TABLE_END)].strip()
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    assert shown == report.docs_table(results), (
        "rerun benchmarks/run.py --docs benchmarks/results.json"
    )
    assert "| log1pexp n=100 | " in shown


def _readme_commands() -> list[str]:
    return re.findall(r"```bash\n(python3 -m pip install torch==[^\n]*)\n```", README)


def test_readme_gives_the_main_job_and_test_commands_that_ci_runs():
    main_job, tests = _readme_commands()
    torch_pin = "python3 -m pip install torch==2.13.0"
    assert main_job == f"{torch_pin} && python3 -m pip install -e . && python3 -m tf_compat_grad"
    install, run = tests.split(" && ")[1:]
    assert tests.startswith(torch_pin + " && ")
    ci_lines = {line.strip() for line in CI.splitlines()}
    assert {torch_pin, install, run, "python3 -m tf_compat_grad"} <= ci_lines, (
        "the README's commands are the ones .ci/run runs"
    )
    assert run == "python3 -m pytest -q"


def test_readme_links_are_absolute():
    targets = links(README)
    assert len(targets) >= 10
    relative = [t for t in targets if not t.startswith("https://")]
    assert not relative, "the README is the package index's page: use absolute https links"


@pytest.mark.parametrize(
    "url", sorted({t for t in links(README) if t.startswith((DOCS_URL, REPO_FILE_URL))})
)
def test_readme_links_lead_to_pages_of_this_repository(url: str):
    if url.startswith(DOCS_URL):
        page = url.removeprefix(DOCS_URL).strip("/") or "index"
        assert (ROOT / "docs" / f"{page}.md").is_file(), f"no docs/{page}.md for {url}"
    else:
        assert (ROOT / url.removeprefix(REPO_FILE_URL)).is_file(), url
