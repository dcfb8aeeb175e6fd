"""`python -m tf_compat_grad port` on a directory tree (`--intree/--outtree`, `--inplace`,
`--diff`, `-j`), the JSON report, never losing a source, and `--check`, through the command
line's entry point."""

import json
import os
import shutil
from pathlib import Path

import pytest

from tf_compat_grad import _cli

pytest.importorskip("libcst")

CORPUS = Path(__file__).resolve().parent / "port_corpus"


@pytest.fixture
def intree(tmp_path: Path) -> Path:
    """Two TensorFlow files (one in a package folder), a data file, and nothing else."""
    root = tmp_path / "tf_src"
    (root / "layers").mkdir(parents=True)
    shutil.copy(CORPUS / "log1pexp.py", root / "log1pexp.py")
    shutil.copy(CORPUS / "variable_read.py", root / "layers" / "variable_read.py")
    (root / "layers" / "notes.txt").write_text("kept as it is\n")
    return root


def test_tree_is_translated_file_by_file_and_other_files_copied(intree, tmp_path, capsys):
    out = tmp_path / "torch_src"
    assert _cli.main(["port", "--intree", str(intree), "--outtree", str(out)]) == 0
    assert (out / "layers" / "notes.txt").read_text() == "kept as it is\n"
    for name in ("log1pexp.py", "layers/variable_read.py"):
        code = (out / name).read_text()
        assert "from tf_compat_grad import custom_gradient" in code
        assert "tensorflow" not in code
    err = capsys.readouterr().err
    progress, report = err.split("\n", 2)[:2], err.split("\n", 2)[2]
    assert progress == [
        f"tf_compat_grad port: [1/2] {intree / 'layers' / 'variable_read.py'}: 8 translated, "
        "0 flagged",
        f"tf_compat_grad port: [2/2] {intree / 'log1pexp.py'}: 7 translated, 0 flagged",
    ]
    # the totals first, as tf_upgrade_v2 prints them, then each file's report
    assert report.startswith(
        "tf_compat_grad port: 2 file(s) translated: 15 construct(s) translated, 0 flagged in 0 "
        "file(s)\n\n"
    )
    assert f"{intree / 'log1pexp.py'}: 7 translated, 0 flagged" in report


def test_tree_report_as_json(intree, tmp_path, capsys):
    out = tmp_path / "torch_src"
    assert _cli.main(["port", "--intree", str(intree), "--outtree", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert [Path(f["output"]).name for f in document["files"]] == [
        "variable_read.py",  # layers/variable_read.py sorts first
        "log1pexp.py",
    ]
    assert document["translated"] == sum(f["translated"] for f in document["files"]) == 15
    assert document["flagged"] == 0


def test_a_file_that_does_not_parse_is_named_and_the_rest_translated(intree, tmp_path, capsys):
    (intree / "broken.py").write_text("def f(:\n")
    out = tmp_path / "torch_src"
    assert _cli.main(["port", "--intree", str(intree), "--outtree", str(out)]) == 2
    assert "broken.py" in capsys.readouterr().err
    assert (out / "log1pexp.py").exists()
    assert not (out / "broken.py").exists()


@pytest.mark.slow
def test_check_runs_the_checker_on_the_translation(tmp_path, capsys):
    out = tmp_path / "log1pexp_torch.py"
    status = _cli.main(["port", str(CORPUS / "log1pexp.py"), "-o", str(out), "--check"])
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "checking 1 translated file(s)" in printed
    assert "log1pexp" in printed
    assert "Result: OK (exit status 0)" in printed


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--intree", "."], "--intree needs --outtree (or --inplace, or --diff)"),
        (["--outtree", "o"], "--outtree needs --intree"),
        (["x.py", "--diff", "-o", "y.py"], "--diff writes nothing"),
        (["x.py", "-j", "0"], "-j must be 1 or more"),
        (["x.py", "--inplace", "-o", "y.py"], "--inplace writes over INPUT: leave out -o"),
        (["x.py", "--intree", ".", "--outtree", "o"], "not both"),
        (["x.py", "--check"], "--check needs the translation written to a file: add -o OUTPUT"),
        ([], "give INPUT (a .py file) or --intree DIR --outtree DIR"),
        (["--intree", ".", "--outtree", "."], "--outtree must differ from --intree"),
    ],
)
def test_arguments_that_do_not_fit_are_refused(argv, message, capsys):
    assert _cli.main(["port", *argv]) == 2
    assert message in capsys.readouterr().err


def test_the_input_is_never_written_over_without_inplace(tmp_path, capsys):
    source = tmp_path / "a.py"
    shutil.copy(CORPUS / "log1pexp.py", source)
    link = tmp_path / "link.py"
    link.symlink_to(source)
    original = source.read_text()
    for output in (source, link):
        assert _cli.main(["port", str(source), "-o", str(output)]) == 2
        assert "the TensorFlow source would be lost; add --inplace" in capsys.readouterr().err
        assert source.read_text() == original


def test_inplace_keeps_a_backup_and_refuses_to_overwrite_it(tmp_path, capsys):
    source = tmp_path / "a.py"
    shutil.copy(CORPUS / "log1pexp.py", source)
    original = source.read_text()
    assert _cli.main(["port", str(source), "--inplace"]) == 0
    assert (tmp_path / "a.py.bak").read_text() == original
    ported = source.read_text()
    assert "import torch" in ported and "tensorflow" not in ported
    assert _cli.main(["port", str(source), "--inplace"]) == 0  # the backup is not replaced
    assert "a.py.bak exists" in capsys.readouterr().err
    assert (tmp_path / "a.py.bak").read_text() == original and source.read_text() == ported


def test_a_tree_translated_in_place(intree, capsys):
    assert _cli.main(["port", "--intree", str(intree), "--inplace"]) == 0
    assert "import torch" in (intree / "log1pexp.py").read_text()
    assert "import tensorflow" in (intree / "log1pexp.py.bak").read_text()
    assert not (intree / "layers" / "notes.txt.bak").exists()


def test_diff_prints_unified_diffs_and_writes_nothing(intree, capsys):
    before = {p: p.read_text() for p in intree.rglob("*") if p.is_file()}
    assert _cli.main(["port", "--intree", str(intree), "--diff"]) == 0
    out = capsys.readouterr().out
    assert f"--- {intree / 'log1pexp.py'}\n+++ {intree / 'log1pexp.py'} (ported)\n" in out
    assert "-import tensorflow as tf\n+import torch\n" in out
    assert {p: p.read_text() for p in intree.rglob("*") if p.is_file()} == before


@pytest.mark.slow  # spawns worker processes, each importing torch
def test_parallel_jobs_give_the_same_outputs_and_report(intree, tmp_path, capsys):
    reports = []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        argv = ["port", "--intree", str(intree), "--outtree", str(out), "--json", "-j", jobs]
        assert _cli.main(argv) == 0
        document = json.loads(capsys.readouterr().out)
        for f in document["files"]:
            f["output"] = Path(f["output"]).relative_to(out).as_posix()
        reports.append(document)
    assert reports[0] == reports[1]
    for name in ("log1pexp.py", "layers/variable_read.py"):
        assert (tmp_path / "out1" / name).read_text() == (tmp_path / "out2" / name).read_text()


def test_a_failed_write_leaves_the_old_file_whole(tmp_path, monkeypatch):
    from tf_compat_grad._port import cli

    target = tmp_path / "out.py"
    target.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        cli.write_atomically(target, "new code\n" * 1000)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.py"]  # no temporary file left
