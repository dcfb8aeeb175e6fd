"""`python -m tf_compat_grad port`: one file (`INPUT [-o OUTPUT]`) or a directory tree
(`--intree DIR --outtree DIR`, as TensorFlow's `tf_upgrade_v2` takes them), with the report;
`--diff` prints unified diffs instead of writing, `-j N` translates N files at a time,
`--inplace` writes over the inputs (keeping each as `NAME.bak`), `--check` then runs the
gradient checker on what was written. A file is written whole or not at all (a temporary file
renamed over it), and an input is never written over unless `--inplace` asks for it.

Exit status: 0 when everything was translated (and, with `--check`, no check fails), 1 when
something was left untranslated or a check fails, 2 when an input cannot be read or parsed,
libcst is missing or the arguments do not fit together.
"""

from __future__ import annotations

import argparse
import difflib
import json
import multiprocessing
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._exit_status import ExitStatus
from ._report import PortResult

# The decorators whose translation makes an output file worth checking.
_DECORATORS = ("tf.custom_gradient", "tf.recompute_grad", "tf.grad_pass_through")
SCHEMA_VERSION = 1  # of the JSON report (`--json`): bumped when a field changes meaning
BACKUP = ".bak"  # `--inplace` keeps each input as NAME.bak


def add_parser(commands: Any) -> None:
    """The `port` subcommand, added to the command line's subparsers."""
    port = commands.add_parser(
        "port",
        help="translate TensorFlow custom-gradient code to PyTorch with this library",
        description="Translate INPUT, a TensorFlow source file (or every .py file under "
        "--intree), into PyTorch code that uses tf_compat_grad (the guide: docs/port.md). "
        "What cannot be translated with certainty is left as written under a "
        "'# tf_compat_grad port: <why>' comment and listed in the report. "
        'Needs libcst: pip install "tf-compat-grad[port]".',
        epilog="Exit status: 0 if everything was translated (and --check found no failure), 1 "
        "if something was left untranslated or a check fails, 2 if an input cannot be read or "
        "parsed, libcst is missing, or the arguments do not fit together.",
    )
    port.add_argument("input", metavar="INPUT", nargs="?", help="the TensorFlow .py file")
    port.add_argument(
        "-o", "--output", metavar="OUTPUT", help="write the PyTorch code here (default: stdout)"
    )
    port.add_argument(
        "--intree", metavar="DIR", help="translate every .py file under DIR (with --outtree)"
    )
    port.add_argument(
        "--outtree",
        metavar="DIR",
        help="write the translated tree here, other files copied as they are",
    )
    port.add_argument(
        "--inplace",
        action="store_true",
        help=f"write over INPUT (or every .py file under --intree), keeping each as NAME{BACKUP}",
    )
    port.add_argument(
        "--diff",
        action="store_true",
        help="print unified diffs of the translation on stdout instead of writing files",
    )
    port.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="translate N files at a time (default: 1)",
    )
    port.add_argument("--report", metavar="REPORT", help="write the report here (default: stderr)")
    port.add_argument(
        "--json",
        action="store_true",
        help=f"write the report as JSON (schema_version {SCHEMA_VERSION}) instead of text",
    )
    port.add_argument(
        "--check",
        action="store_true",
        help="then run `python -m tf_compat_grad check` on the translated files that define "
        "custom gradients (needs -o, --outtree or --inplace)",
    )


@dataclass(frozen=True)
class _Job:
    source: str
    output: str | None  # None: stdout (or a diff)


@dataclass(frozen=True)
class _Done:
    job: _Job
    result: PortResult | None  # None: it could not be read or parsed
    error: str = ""
    text: str = ""  # the input's text, for --diff


def run(args: argparse.Namespace, check: Callable[[list[str]], int]) -> int:
    """Carry out a parsed `port` command; `check(paths)` runs the checker on written files."""
    tree = args.intree is not None or args.outtree is not None
    problem = _arguments_problem(args, tree)
    if problem:
        print(f"tf_compat_grad port: error: {problem}", file=sys.stderr)
        return ExitStatus.USAGE
    jobs = _tree_jobs(args) if tree else [_single_job(args)]
    done = _translate(jobs, args.jobs, progress=len(jobs) > 1)
    status = ExitStatus.OK
    for item in done:
        if item.result is None:
            print(f"tf_compat_grad port: error: {item.error}", file=sys.stderr)
            status = ExitStatus.USAGE
        elif item.result.flagged:
            status = max(status, ExitStatus.FAILED)
    written = _write_outputs(args, done)
    _write_report(args, [d for d in done if d.result is not None], tree)
    if args.check and status != ExitStatus.USAGE:
        checked = [out for out, r in written if _defines_custom_gradients(r)]
        if checked:
            print(f"\ntf_compat_grad port: checking {len(checked)} translated file(s)")
            status = max(status, ExitStatus.FAILED if check(checked) else ExitStatus.OK)
    return status


def _same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (the same path, or a link to it)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def _arguments_problem(args: argparse.Namespace, tree: bool) -> str:
    if args.jobs < 1:
        return "-j must be 1 or more"
    writes = not args.diff
    if args.diff and (args.output is not None or args.outtree is not None or args.inplace):
        return "--diff writes nothing: leave out -o, --outtree and --inplace"
    if args.check and args.diff:
        return "--check needs the translation written: leave out --diff"
    if tree:
        if args.input is not None or args.output is not None:
            return "give either INPUT [-o OUTPUT] or --intree DIR --outtree DIR, not both"
        if args.intree is None:
            return "--outtree needs --intree"
        if not Path(args.intree).is_dir():
            return f"--intree {args.intree}: no such directory"
        if args.inplace and args.outtree is not None:
            return "--inplace writes over --intree: leave out --outtree"
        if writes and not args.inplace and args.outtree is None:
            return "--intree needs --outtree (or --inplace, or --diff)"
        if args.outtree is not None and _same_file(args.outtree, args.intree):
            return (
                "--outtree must differ from --intree (the sources are kept as they are); "
                f"--inplace writes over them, keeping each as NAME{BACKUP}"
            )
        return ""
    if args.input is None:
        return "give INPUT (a .py file) or --intree DIR --outtree DIR"
    if args.inplace and args.output is not None and not _same_file(args.output, args.input):
        return "--inplace writes over INPUT: leave out -o"
    if args.output is not None and not args.inplace and _same_file(args.output, args.input):
        return (
            f"-o {args.output} is the input {args.input}: the TensorFlow source would be lost; "
            f"add --inplace to write over it (it is kept as {args.input}{BACKUP})"
        )
    if args.check and args.output is None and not args.inplace:
        return "--check needs the translation written to a file: add -o OUTPUT"
    return ""


def _single_job(args: argparse.Namespace) -> _Job:
    if args.inplace:
        return _Job(args.input, args.input)
    return _Job(args.input, None if args.diff else args.output)


def _tree_jobs(args: argparse.Namespace) -> list[_Job]:
    """A job for every .py file under --intree; with --outtree every other file is copied."""
    intree = Path(args.intree)
    outtree = Path(args.outtree) if args.outtree is not None else None
    jobs = []
    for path in sorted(p for p in intree.rglob("*") if p.is_file()):
        if outtree is not None and outtree.resolve() in path.resolve().parents:
            continue  # an --outtree inside --intree: its files are outputs
        if args.diff or args.inplace or outtree is None:
            if path.suffix == ".py":
                jobs.append(_Job(str(path), None if args.diff else str(path)))
            continue
        target = outtree / path.relative_to(intree)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            jobs.append(_Job(str(path), str(target)))
        else:
            shutil.copy2(path, target)
    return jobs


def _translate(jobs: Sequence[_Job], workers: int, progress: bool) -> list[_Done]:
    """Each job's translation, in order; `progress` says each file on stderr as it is done."""
    if workers > 1 and len(jobs) > 1:
        # spawn: a fork of a process with threads (torch's) may deadlock
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
            results = pool.map(_port_one, jobs)
            return [_said(d, i, len(jobs), progress) for i, d in enumerate(results, 1)]
    return [_said(_port_one(job), i, len(jobs), progress) for i, job in enumerate(jobs, 1)]


def _said(done: _Done, index: int, total: int, progress: bool) -> _Done:
    if progress:
        if done.result is None:
            state = "error"
        else:
            state = f"{len(done.result.translated)} translated, {len(done.result.flagged)} flagged"
        print(f"tf_compat_grad port: [{index}/{total}] {done.job.source}: {state}", file=sys.stderr)
    return done


def _port_one(job: _Job) -> _Done:
    """Translate one file (in a worker process with -j)."""
    from ..port import PortDependencyError, port_source

    try:
        text = Path(job.source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        return _Done(job, None, f"cannot read {job.source}: {error}")
    try:
        return _Done(job, port_source(text, job.source), text=text)
    except (PortDependencyError, ValueError) as error:
        return _Done(job, None, str(error))


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: a temporary file beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        if path.exists():
            shutil.copymode(path, temporary)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_outputs(args: argparse.Namespace, done: Sequence[_Done]) -> list[tuple[str, PortResult]]:
    """Write (or print, or diff) each translation; the files written, with their results."""
    written = []
    for item in done:
        if item.result is None:
            continue
        code, job = item.result.code, item.job
        if args.diff:
            sys.stdout.writelines(
                difflib.unified_diff(
                    item.text.splitlines(keepends=True),
                    code.splitlines(keepends=True),
                    fromfile=job.source,
                    tofile=job.source + " (ported)",
                )
            )
            continue
        if job.output is None:
            sys.stdout.write(code)
            continue
        if args.inplace:
            backup = Path(job.source + BACKUP)
            if backup.exists():
                print(
                    f"tf_compat_grad port: error: {backup} exists: {job.source} was not written "
                    "over (move the backup away to translate it again)",
                    file=sys.stderr,
                )
                continue
            shutil.copy2(job.source, backup)
        write_atomically(Path(job.output), code)
        written.append((job.output, item.result))
    return written


def _write_report(args: argparse.Namespace, done: Sequence[_Done], tree: bool) -> None:
    results = [(d.job, d.result) for d in done if d.result is not None]
    translated = sum(len(r.translated) for _, r in results)
    flagged = sum(len(r.flagged) for _, r in results)
    if args.json:
        document: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "files": [{"input": j.source, "output": j.output, **r.to_dict()} for j, r in results],
            "translated": translated,
            "flagged": flagged,
        }
        report = json.dumps(document, indent=2) + "\n"
    else:
        needing = sum(1 for _, r in results if r.flagged)
        totals = (
            f"tf_compat_grad port: {len(results)} file(s) translated: {translated} construct(s) "
            f"translated, {flagged} flagged in {needing} file(s)"
            + (" (look for '# tf_compat_grad port:' in them)" if flagged else "")
        )
        details = "\n\n".join(r.text(j.source) for j, r in results)
        report = f"{totals}\n\n{details}\n" if tree or len(results) > 1 else details + "\n"
    if args.report is not None:
        write_atomically(Path(args.report), report)
    elif args.json and not args.diff and (args.output is not None or tree or args.inplace):
        sys.stdout.write(report)  # stdout holds no code: keep it pure JSON
    else:
        sys.stderr.write(report)


def _defines_custom_gradients(result: PortResult) -> bool:
    return any(entry.tf.startswith(_DECORATORS) for entry in result.translated)
