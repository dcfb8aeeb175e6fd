"""The README's benchmark table is generated from benchmarks/results.json by the benchmark
itself (`python3 benchmarks/run.py --readme benchmarks/results.json`), so it cannot drift."""

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


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


def test_readme_benchmark_table_is_generated_from_results_json():
    report = _report_module()
    readme = (ROOT / "README.md").read_text()
    start = readme.index(report.README_START) + len(report.README_START)
    shown = readme[start : readme.index(report.README_END)].strip()
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    assert shown == report.readme(results), (
        "rerun benchmarks/run.py --readme benchmarks/results.json"
    )
    assert "| log1pexp n=100 | " in shown
