"""`python -m tf_compat_grad check [TARGET ...]`: find the decorated functions of modules and
check each one on its example inputs, or on inputs built from its signature where it has none.

Exit status: 0 when no check fails, 1 when one does, 2 when a TARGET cannot be imported, names
nothing decorated, or `--only` names nothing known, 3 when nothing could be checked (no function
has example inputs and none could be built).

`python -m tf_compat_grad port ...` (`_port/cli.py`): translate TensorFlow files with
`tf_compat_grad.port`. Exit status: 0 when everything was translated, 1 when
something was left untranslated (flagged), 2 when INPUT cannot be read or parsed, or libcst is
missing.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import json
import os
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from ._decorator import CustomGradient
from ._exit_status import EXIT_FAILED, EXIT_NOTHING_CHECKED, EXIT_OK, EXIT_USAGE
from .testing import CHECKS, Report, Status

GALLERY = "tf_compat_grad.examples"
_FACTORY_MAKERS = frozenset({"custom_gradient", "recompute_grad", "grad_pass_through"})


class TargetError(Exception):
    """A TARGET that cannot be checked (exit status 2)."""


class Entry:
    """A decorated function found in a target: how to call it, and its example inputs."""

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any] | None,
        example: Any,
        location: str,
        missing: str = "",
        owner: type | None = None,
    ) -> None:
        self.name = name
        self.fn = fn
        self.example = example
        self.location = location
        self.missing = missing  # why there is nothing to check, when there is not
        self.owner = owner  # the class of a method taken from it
        self.generated = ""  # how the example was built, when it was

    def build_example(self) -> None:
        """Example inputs from the signature, where the function has none (`_checker/generated.py`)."""
        from ._checker.generated import CannotBuild, build

        if self.fn is None or self.example is not None:
            return
        try:
            self.example, self.generated = build(self.fn, self.owner)
        except CannotBuild as error:
            self.missing = f"none could be built: {error}. To check it, {self.missing}"


# --- finding the decorated functions ------------------------------------------------------


def load(target: str) -> ModuleType:
    """Import a module by name, or a `.py` file by path."""
    try:
        if target.endswith(".py") or os.sep in target or (os.altsep or os.sep) in target:
            path = Path(target).resolve()
            if not path.is_file():
                raise TargetError(f"{target}: no such file")
            name = path.stem
            if name in sys.modules:
                name = f"{name}_{abs(hash(str(path))):x}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise TargetError(f"{target}: not a Python file")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            if str(path.parent) not in sys.path:
                sys.path.insert(0, str(path.parent))  # its own sibling imports
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # the console script does not add it
        return importlib.import_module(target)
    except TargetError:
        raise
    except (Exception, SystemExit) as error:
        lines = str(error).strip().splitlines()
        message = f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
        raise TargetError(f"cannot import {target}: {message}") from None


def discover(module: ModuleType) -> list[Entry]:
    """The decorated functions a module defines: module-level ones, decorated methods of its
    classes, and factories that make one (listed, with nothing to check)."""
    from ._checker.subject import location

    entries: list[Entry] = []
    here = module.__name__
    for attr, value in list(vars(module).items()):
        if isinstance(value, CustomGradient):
            if getattr(value, "__module__", here) == here:
                entries.append(Entry(attr, value, value.example, location(value)))
        elif isinstance(value, type) and value.__module__ == here:
            entries.extend(_methods(value))
        elif inspect.isfunction(value) and value.__module__ == here and _is_factory(value):
            entries.append(
                Entry(
                    attr,
                    None,
                    None,
                    location(value),
                    missing=f"a factory that makes a custom gradient; check what it returns "
                    f"with `tf_compat_grad.testing.check({attr}(...), *example_args)`",
                )
            )
    for entry in entries:
        if entry.fn is not None and entry.example is None:
            entry.missing = (
                f"add `@custom_gradient(example=lambda: (torch.randn(3),))` with its "
                f"arguments, or call `tf_compat_grad.testing.check({entry.name}, *example_args)`"
            )
    return entries


def _methods(cls: type) -> list[Entry]:
    from ._checker.subject import decorated, location

    found = []
    for attr, member in vars(cls).items():
        cg = decorated(member)
        if cg is not None:
            fn = getattr(cls, attr)
            found.append(
                Entry(
                    f"{cls.__qualname__}.{attr}",
                    fn,
                    cg.example,
                    location(cg),
                    owner=cls,
                )
            )
    return found


def _is_factory(fn: Callable[..., Any]) -> bool:
    """Whether `fn` defines a decorated function inside it (e.g. `make_linear_poly`)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return False
    root = tree.body[0] if tree.body else None
    for node in ast.walk(tree):
        if node is root:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_names_maker(d) for d in node.decorator_list):
                return True
        elif isinstance(node, ast.Call) and _names_maker(node.func):
            return True
    return False


def _names_maker(node: ast.expr) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id in _FACTORY_MAKERS
    return isinstance(node, ast.Attribute) and node.attr in _FACTORY_MAKERS


# --- output -------------------------------------------------------------------------------


class _Progress:
    """One progress line on stderr: rewritten in place on a terminal, a line per function
    otherwise (so logs stay readable)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.active = False

    def function(self, index: int, total: int, name: str) -> None:
        self.prefix = f"[{index}/{total}] {name}"
        if self.tty:
            self.show("")
        else:
            self.stream.write(f"checking {self.prefix}\n")
            self.stream.flush()

    def show(self, check: str) -> None:
        if self.tty:
            line = f"{self.prefix}: {check}" if check else self.prefix
            self.stream.write("\r\033[K" + line[:150])
            self.stream.flush()
            self.active = True

    def clear(self) -> None:
        if self.active:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.active = False


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def _summary(
    reports: list[tuple[str, Report]],
    generated: list[Entry],
    missing: list[Entry],
    seconds: float,
) -> tuple[str, dict[str, Any]]:
    counts = {s.value: 0 for s in Status}
    for _, report in reports:
        for name, n in report.counts().items():
            counts[name] += n
    failing = [(name, r.failed) for name, r in reports if r.failed]
    warning = [(name, r.warned) for name, r in reports if r.warned]
    lines = [
        f"Summary: {_plural(len(reports), 'function')} checked in {seconds:.1f} s"
        + (
            f" ({len(generated)} on generated inputs: {', '.join(e.name for e in generated)})"
            if generated
            else ""
        )
        + (
            f", {len(missing)} without example inputs ({', '.join(e.name for e in missing)})"
            if missing
            else ""
        ),
        "  checks: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
        f"  functions: {len(reports) - len(failing) - sum(1 for n, r in reports if r.warned and not r.failed)} "
        f"pass, {sum(1 for _, r in reports if r.warned and not r.failed)} with warnings, "
        f"{len(failing)} failing",
    ]
    for label, group in (("FAIL", failing), ("WARN", warning)):
        if group:
            lines.append(
                f"  {label}: "
                + "; ".join(f"{name} ({', '.join(checks)})" for name, checks in group)
            )
    if not reports:
        status = EXIT_NOTHING_CHECKED
        lines.append(
            f"Result: NOTHING CHECKED (exit status {status}): no function has example inputs, "
            "and none could be built (see above)"
        )
    else:
        status = EXIT_FAILED if failing else EXIT_OK
        lines.append("Result: " + ("FAIL" if failing else "OK") + f" (exit status {status})")
    data = {
        "functions": len(reports),
        "generated_example_inputs": [e.name for e in generated],
        "without_example_inputs": [e.name for e in missing],
        "counts": counts,
        "failing": [name for name, _ in failing],
        "warning": [name for name, _ in warning],
        "seconds": round(seconds, 2),
        "exit_status": status,
    }
    return "\n".join(lines), data


# --- the command --------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tf_compat_grad",
        description="Check ported custom gradients: the gradient against finite differences "
        "and autodiff, linearity in the upstream, determinism, second order, torch.func, "
        "torch.compile, autocast, no_grad, in-place safety and memory. With no command, "
        "checks the bundled gallery (tf_compat_grad.examples). `port` translates TensorFlow "
        "custom-gradient source into code that uses this library.",
    )
    commands = parser.add_subparsers(dest="command", metavar="{check,port}")
    check = commands.add_parser(
        "check",
        help="check the decorated functions of modules",
        description="Check every decorated function of each TARGET (a module name or a .py "
        "path; default: the bundled gallery) on its example inputs "
        "(`@custom_gradient(example=...)`). A function without them is checked on inputs "
        "built from its signature (float64 tensors for parameters annotated as tensors or not "
        "annotated, Python numbers for float and int; fixed seed), reported as generated; "
        "those it cannot build inputs for are listed with the reason.",
        epilog="Exit status: 0 if no check fails, 1 if one does, 2 if a TARGET cannot be "
        "imported or names nothing decorated, or --only names nothing known, 3 if nothing "
        "was checked (no function has example inputs and none could be built).",
    )
    check.add_argument("targets", nargs="*", metavar="TARGET", help="module name or .py path")
    check.add_argument(
        "--json", metavar="FILE", help="also write the reports as JSON ('-': stdout)"
    )
    check.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        default=[],
        help=f"run only this check ({', '.join(CHECKS)}) or only this function; repeat or "
        "separate with commas",
    )
    from ._port.cli import add_parser

    add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] not in ("check", "port", "-h", "--help"):
        args_list.insert(0, "check")
    args = _parser().parse_args(args_list)
    if args.command == "port":
        from ._port.cli import run

        return run(args, lambda paths: _check_or_usage(paths, None, []))
    return _check_or_usage(args.targets or [GALLERY], args.json, args.only)


def _check_or_usage(targets: list[str], json_path: str | None, only: list[str]) -> int:
    """`_check`'s exit status, or 2 with the reason when a target cannot be checked (also for
    the files `port --check` wrote)."""
    try:
        return _check(targets, json_path, only)
    except TargetError as error:
        print(f"tf_compat_grad: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _check(targets: list[str], json_path: str | None, only: list[str]) -> int:
    from .testing import run_checks

    found: list[tuple[str, Entry]] = []
    for target in targets:
        module = load(target)
        entries = discover(module)
        if not entries:
            raise TargetError(
                f"{target} defines no decorated function (no @custom_gradient, "
                "recompute_grad or grad_pass_through at module level or on its classes)"
            )
        found.extend((module.__name__, e) for e in entries)
    names = [n.strip() for item in only for n in item.split(",") if n.strip()]
    checks = [n for n in names if n in CHECKS]
    functions = [n for n in names if n not in CHECKS]
    known = {e.name for _, e in found} | {e.name.rsplit(".", 1)[-1] for _, e in found}
    unknown = [n for n in functions if n not in known]
    if unknown:
        raise TargetError(
            f"--only {', '.join(unknown)}: neither a check ({', '.join(CHECKS)}) nor a "
            f"decorated function of {', '.join(targets)}"
        )
    if functions:
        found = [
            (m, e)
            for m, e in found
            if e.name in functions or e.name.rsplit(".", 1)[-1] in functions
        ]

    out = sys.stderr if json_path == "-" else sys.stdout  # keep stdout pure JSON
    progress = _Progress(sys.stderr)
    start = time.perf_counter()
    for _, entry in found:
        entry.build_example()
    runnable = [(m, e) for m, e in found if e.fn is not None and e.example is not None]
    missing = [e for _, e in found if e.fn is None or e.example is None]
    reports: list[tuple[str, Report]] = []
    results: list[dict[str, Any]] = []
    current = None
    index = 0
    for module_name, entry in found:
        if module_name != current:
            current = module_name
            here = [e for m, e in found if m == module_name]
            factories = sum(1 for e in here if e.fn is None)
            count = _plural(len(here) - factories, "decorated function")
            extra = f", {_plural(factories, 'factory')}" if factories else ""
            out.write(f"== {module_name}: {count}{extra} ==\n\n")
        if entry.fn is None or entry.example is None:
            where = f" ({entry.location})" if entry.location else ""
            out.write(f"{entry.name}{where}  no example inputs\n  {entry.missing}\n\n")
            results.append(
                {
                    "function": entry.name,
                    "module": module_name,
                    "location": entry.location,
                    "checked": False,
                    "reason": f"no example inputs: {entry.missing}",
                }
            )
            continue
        index += 1
        progress.function(index, len(runnable), entry.name)
        report = run_checks(
            entry.fn, entry.example, only=checks or None, name=entry.name, progress=progress.show
        )
        if entry.generated:
            report.example = f"{report.example}, {entry.generated}"
        progress.clear()
        out.write(f"{report}\n\n")
        out.flush()
        reports.append((entry.name, report))
        results.append(
            {
                "module": module_name,
                "checked": True,
                "generated_example": bool(entry.generated),
                **report.to_dict(),
            }
        )
    generated = [e for _, e in runnable if e.generated]
    text, summary = _summary(reports, generated, missing, time.perf_counter() - start)
    out.write(text + "\n")
    out.flush()
    if json_path is not None:
        from . import __version__

        document = {
            "tf_compat_grad": __version__,
            "targets": targets,
            "checks": checks or list(CHECKS),
            "functions": results,
            "summary": summary,
        }
        payload = json.dumps(document, indent=2, default=str)
        if json_path == "-":
            sys.stdout.write(payload + "\n")
        else:
            Path(json_path).write_text(payload + "\n", encoding="utf-8")
    return int(summary["exit_status"])
