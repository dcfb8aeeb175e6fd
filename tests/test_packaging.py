"""The release as a user gets it: the wheel and the sdist build, the wheel's metadata is what a
package index shows (absolute links, the project's URLs, no development tools in its extras), the
wheel installs into a fresh virtual environment and its command line runs there, and the tests
that read files outside `tests/` find them in the sdist.

The build runs hatchling without build isolation (hatchling is in requirements-dev.txt), and the
fresh environment reuses this one's torch (`--system-site-packages`, `pip install --no-index`), so
nothing is downloaded.
"""

from __future__ import annotations

import email
import importlib.util
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from helpers import links

ROOT = Path(__file__).resolve().parent.parent
URLS = {
    "Homepage": "https://github.com/tf-compat-grad/tf-compat-grad",
    "Documentation": "https://tf-compat-grad.github.io/tf-compat-grad/",
    "Changelog": "https://github.com/tf-compat-grad/tf-compat-grad/blob/main/CHANGELOG.md",
    "Issues": "https://github.com/tf-compat-grad/tf-compat-grad/issues",
}

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("hatchling") is None,
        reason="hatchling builds the wheel and sdist: python3 -m pip install -r requirements-dev.txt",
    ),
]


def _run(*args: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # A clean environment: no PYTHONPATH, and none of the variables a pytest-xdist worker sets
    # (a plugin in the child pytest would take it for a worker).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("PYTEST_")}
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "hatchling", "build", "-d", out, cwd=ROOT)
    return out


def _metadata(dist: Path) -> email.message.Message:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_string(archive.read(name).decode())


def test_wheel_metadata_is_what_a_package_index_shows(dist: Path) -> None:
    metadata = _metadata(dist)
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL", []))
    assert {k: urls.get(k) for k in URLS} == URLS
    assert metadata["Description-Content-Type"] == "text/markdown"
    description = metadata.get_payload()
    assert isinstance(description, str) and "pip install tf-compat-grad" in description
    targets = links(description)
    assert targets and all(t.startswith("https://") for t in targets), "relative links are dead"
    extras = set(metadata.get_all("Provides-Extra", []))
    assert {"port", "test", "docs"} <= extras and "dev" not in extras
    requirements = " ".join(metadata.get_all("Requires-Dist", []))
    for tool in ("ruff", "mypy", "basedpyright"):
        assert tool not in requirements, f"{tool} is a development tool, not a published extra"


def test_sdist_holds_what_the_tests_read(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {n.split("/", 1)[1] for n in archive.getnames() if "/" in n}
    needed = {
        ".ci/run",
        ".ci/matrix.py",
        "benchmarks/_report.py",
        "benchmarks/results.json",
        "docs/performance.md",
        "docs/supported_versions.md",
        "mkdocs.yml",
        "requirements-dev.txt",
        "conftest.py",
        "README.md",
        "tests/test_docs.py",
    }
    assert needed <= names, needed - names


def test_tests_that_read_outside_tests_run_from_the_sdist(dist: Path, tmp_path: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    (unpacked,) = tmp_path.iterdir()
    files = ["tests/test_versions.py", "tests/test_readme.py", "tests/test_docs.py"]
    done = _run(
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *files,
        cwd=unpacked,
    )  # fmt: skip
    assert " passed" in done.stdout and "error" not in done.stdout.lower()


def test_wheel_installs_into_a_fresh_environment_and_runs(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    # Without a pip (and setuptools) of its own, the environment sees this one's, which torch's
    # requirements accept; this environment's pip installs into it (`--python`).
    _run(
        sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv, cwd=tmp_path
    )
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "--no-index"]
    _run(*pip, "--no-cache-dir", wheel, cwd=tmp_path)
    where = _run(
        python, "-c", "import tf_compat_grad; print(tf_compat_grad.__file__)", cwd=tmp_path
    )
    assert where.stdout.startswith(str(venv)), "the wheel's package, not a checkout's"
    helped = _run(venv / "bin" / "tf-compat-grad", "--help", cwd=tmp_path)
    assert "check" in helped.stdout and "port" in helped.stdout
    main_job = _run(venv / "bin" / "tf-compat-grad", cwd=tmp_path)
    assert "PASS" in main_job.stdout + main_job.stderr
