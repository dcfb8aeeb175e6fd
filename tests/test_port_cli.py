"""`python -m tf_compat_grad port` on a directory tree (`--intree/--outtree`) and with
`--check`, through the command line's entry point."""

import json
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
    report = capsys.readouterr().err
    assert f"{intree / 'log1pexp.py'}: 7 translated, 0 flagged" in report
    assert report.rstrip().endswith("2 file(s): 15 translated, 0 flagged")


def test_tree_report_as_json(intree, tmp_path, capsys):
    out = tmp_path / "torch_src"
    assert _cli.main(["port", "--intree", str(intree), "--outtree", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
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
        (["--intree", "."], "--intree and --outtree go together"),
        (["x.py", "--intree", ".", "--outtree", "o"], "not both"),
        (["x.py", "--check"], "--check needs the translation written to a file: add -o OUTPUT"),
        ([], "give INPUT (a .py file) or --intree DIR --outtree DIR"),
        (["--intree", ".", "--outtree", "."], "--outtree must differ from --intree"),
    ],
)
def test_arguments_that_do_not_fit_are_refused(argv, message, capsys):
    assert _cli.main(["port", *argv]) == 2
    assert message in capsys.readouterr().err
