"""`python -m tf_compat_grad port`: one file (`INPUT [-o OUTPUT]`) or a directory tree
(`--intree DIR --outtree DIR`, as TensorFlow's `tf_upgrade_v2` takes them), with the report;
`--check` then runs the gradient checker on what was written.

Exit status: 0 when everything was translated (and, with `--check`, no check fails), 1 when
something was left untranslated or a check fails, 2 when an input cannot be read or parsed,
libcst is missing or the arguments do not fit together.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._exit_status import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from ._report import PortResult

# The decorators whose translation makes an output file worth checking.
_DECORATORS = ("tf.custom_gradient", "tf.recompute_grad", "tf.grad_pass_through")


def add_parser(commands: Any) -> None:
    """The `port` subcommand, added to the command line's subparsers."""
    port = commands.add_parser(
        "port",
        help="translate TensorFlow custom-gradient code to PyTorch with this library",
        description="Translate INPUT, a TensorFlow source file (or every .py file under "
        "--intree), into PyTorch code that uses tf_compat_grad (the table: "
        "docs/migrating_from_tensorflow.md). What cannot be translated with certainty is left "
        "as written under a '# tf_compat_grad port: <why>' comment and listed in the report. "
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
    port.add_argument("--report", metavar="REPORT", help="write the report here (default: stderr)")
    port.add_argument(
        "--json", action="store_true", help="write the report as JSON instead of text"
    )
    port.add_argument(
        "--check",
        action="store_true",
        help="then run `python -m tf_compat_grad check` on the translated files that define "
        "custom gradients (needs -o or --outtree)",
    )


def run(args: argparse.Namespace, check: Callable[[list[str]], int]) -> int:
    """Carry out a parsed `port` command; `check(paths)` runs the checker on written files."""
    tree = args.intree is not None or args.outtree is not None
    problem = _arguments_problem(args, tree)
    if problem:
        print(f"tf_compat_grad port: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    jobs = (
        _tree_jobs(Path(args.intree), Path(args.outtree)) if tree else [(args.input, args.output)]
    )
    results: list[tuple[str, str | None, PortResult]] = []
    status = EXIT_OK
    for source, output in jobs:
        result = _port_file(source, output)
        if result is None:
            status = EXIT_USAGE
            continue
        results.append((source, output, result))
        if result.flagged:
            status = max(status, EXIT_FAILED)
    _write_report(args, results, tree)
    if args.check and status != EXIT_USAGE:
        checked = [out for _, out, r in results if out and _defines_custom_gradients(r)]
        if checked:
            print(f"\ntf_compat_grad port: checking {len(checked)} translated file(s)")
            status = max(status, EXIT_FAILED if check(checked) else EXIT_OK)
    return status


def _arguments_problem(args: argparse.Namespace, tree: bool) -> str:
    if tree:
        if args.input is not None or args.output is not None:
            return "give either INPUT [-o OUTPUT] or --intree DIR --outtree DIR, not both"
        if args.intree is None or args.outtree is None:
            return "--intree and --outtree go together"
        if not Path(args.intree).is_dir():
            return f"--intree {args.intree}: no such directory"
        if Path(args.outtree).resolve() == Path(args.intree).resolve():
            return "--outtree must differ from --intree (the sources are kept as they are)"
        return ""
    if args.input is None:
        return "give INPUT (a .py file) or --intree DIR --outtree DIR"
    if args.check and args.output is None:
        return "--check needs the translation written to a file: add -o OUTPUT"
    return ""


def _tree_jobs(intree: Path, outtree: Path) -> list[tuple[str, str]]:
    """(input, output) for every .py file under intree; every other file is copied."""
    jobs = []
    for path in sorted(p for p in intree.rglob("*") if p.is_file()):
        target = outtree / path.relative_to(intree)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".py":
            jobs.append((str(path), str(target)))
        else:
            shutil.copy2(path, target)
    return jobs


def _port_file(source: str, output: str | None) -> PortResult | None:
    """Translate one file and write the code (stdout without `output`); None when it cannot
    be read or translated, with the error said on stderr."""
    from ..port import PortDependencyError, port_source

    try:
        result = port_source(Path(source).read_text(encoding="utf-8"), source)
    except (OSError, UnicodeDecodeError) as error:
        print(f"tf_compat_grad port: error: cannot read {source}: {error}", file=sys.stderr)
        return None
    except (PortDependencyError, ValueError) as error:
        print(f"tf_compat_grad port: error: {error}", file=sys.stderr)
        return None
    if output is None:
        sys.stdout.write(result.code)
    else:
        Path(output).write_text(result.code, encoding="utf-8")
    return result


def _write_report(
    args: argparse.Namespace, results: Sequence[tuple[str, str | None, PortResult]], tree: bool
) -> None:
    if args.json:
        files = [{"input": s, "output": o, **r.to_dict()} for s, o, r in results]
        document: dict[str, Any] = files[0] if files and not tree else {"files": files}
        if tree:
            document["translated"] = sum(len(r.translated) for _, _, r in results)
            document["flagged"] = sum(len(r.flagged) for _, _, r in results)
        report = json.dumps(document, indent=2) + "\n"
    else:
        report = "\n\n".join(r.text(s) for s, _, r in results) + "\n"
        if tree:
            translated = sum(len(r.translated) for _, _, r in results)
            flagged = sum(len(r.flagged) for _, _, r in results)
            report += f"\n{len(results)} file(s): {translated} translated, {flagged} flagged\n"
    if args.report is not None:
        Path(args.report).write_text(report, encoding="utf-8")
    elif args.json and (args.output is not None or tree):
        sys.stdout.write(report)  # stdout holds no code: keep it pure JSON
    else:
        sys.stderr.write(report)


def _defines_custom_gradients(result: PortResult) -> bool:
    return any(entry.tf.startswith(_DECORATORS) for entry in result.translated)
