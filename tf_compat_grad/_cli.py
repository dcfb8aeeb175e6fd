"""`python -m tf_compat_grad check [TARGET ...]` (`tf-compat-grad check`): find the decorated
functions of modules and check each one on its example inputs, or on inputs built from its
signature where it has none; the exit statuses (`ExitStatus`) are the `check` parser's epilog.
`python -m tf_compat_grad port ...` is `_port/cli.py`'s.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
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
from typing import Any

from ._checker import console
from ._errors import plural
from ._exit_status import ExitStatus
from .testing import CHECKS, Report, Status

GALLERY = "tf_compat_grad.examples"
SCHEMA_VERSION = 1  # of the `--json` document (docs/checker.md, "JSON"); raised on a change
_FACTORY_MAKERS = frozenset({"custom_gradient", "recompute_grad", "grad_pass_through"})


class TargetError(Exception):
    """A TARGET that cannot be checked (exit status 2)."""


@dataclasses.dataclass(eq=False)
class Entry:
    """A decorated function found in a target: how to call it, and its example inputs."""

    name: str
    fn: Callable[..., Any] | None
    example: Any
    location: str
    missing: str = ""  # why there is nothing to check, when there is not
    owner: type | None = None  # the class of a method taken from it
    generated: str = ""  # how the example was built, when it was

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
    from ._checker.subject import decorated, location

    entries: list[Entry] = []
    here = module.__name__
    for attr, value in list(vars(module).items()):
        cg = decorated(value)
        if cg is not None and vars(value) is vars(cg):  # cg or its function, not a method's
            if getattr(value, "__module__", here) == here:
                entries.append(Entry(attr, value, cg.example, location(cg)))
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
            name = f"{cls.__qualname__}.{attr}"
            found.append(Entry(name, getattr(cls, attr), cg.example, location(cg), owner=cls))
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


# --- the command --------------------------------------------------------------------------


def program_name() -> str:
    """`tf-compat-grad` when run as the installed script, else `python -m tf_compat_grad`."""
    script = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    tool = "tf-compat-grad"
    return tool if script.removesuffix(".exe") == tool else "python -m tf_compat_grad"


def _parser(prog: str) -> argparse.ArgumentParser:
    import torch

    from . import __version__

    parser = argparse.ArgumentParser(
        prog=prog,
        description="Check ported custom gradients: the gradient against finite differences "
        "and autodiff, linearity in the upstream, determinism, second order, torch.func, "
        "torch.compile, autocast, no_grad, in-place safety and memory. With no command, "
        "checks the bundled gallery (tf_compat_grad.examples). `port` translates TensorFlow "
        "custom-gradient source into code that uses this library.",
    )
    parser.add_argument(
        "-V",
        "--version",
        action="version",
        version=f"tf-compat-grad {__version__} (torch {torch.__version__}, Python "
        f"{sys.version.split()[0]})",
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
        "those it cannot build inputs for are listed with the reason. A gradient that differs "
        "from the true derivative fails, unless declared with "
        '`@custom_gradient(surrogate="why")`. Colour on a terminal; NO_COLOR turns it off, '
        "FORCE_COLOR on.",
        epilog="Exit status: 0 if no check fails, 1 if one does (with --strict: or warns), 2 "
        "if a TARGET cannot be imported or names nothing decorated, --only names nothing "
        "known, or an output path cannot be written, 3 if nothing was checked (no function "
        "has example inputs and none could be built).",
    )
    check.add_argument("targets", nargs="*", metavar="TARGET", help="module name or .py path")
    check.add_argument(
        "--json",
        metavar="FILE",
        help="also write the reports as JSON ('-': stdout); schema in docs/checker.md",
    )
    check.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        default=[],
        help=f"run only this check ({', '.join(CHECKS)}) or only this function; repeat or "
        "separate with commas",
    )
    check.add_argument(
        "--strict", action="store_true", help="fail on warnings too (WARN becomes FAIL)"
    )
    check.add_argument(
        "--plot",
        metavar="DIR",
        help="draw each function's gradient against the true derivative along a line through "
        "its example input, one PNG per function in DIR (needs matplotlib: "
        "pip install 'tf-compat-grad[plot]')",
    )
    from ._port.cli import add_parser

    add_parser(commands)
    return parser


@dataclasses.dataclass(eq=False)
class Options:
    """What `check` was asked for besides its targets."""

    json_path: str | None = None
    only: Sequence[str] = ()
    strict: bool = False
    plot: str | None = None
    prog: str = "python -m tf_compat_grad"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if not args_list or args_list[0] not in ("check", "port", "-h", "--help", "-V", "--version"):
        args_list.insert(0, "check")
    prog = program_name()
    args = _parser(prog).parse_args(args_list)
    if args.command == "port":
        from ._port.cli import run

        return run(args, lambda paths: _check_or_usage(paths, Options(prog=prog)))
    options = Options(args.json, args.only, args.strict, args.plot, prog)
    return _check_or_usage(args.targets or [GALLERY], options)


def _check_or_usage(targets: list[str], options: Options) -> int:
    """`_check`'s exit status, or 2 with the reason when a target or an output cannot be used
    (also for the files `port --check` wrote)."""
    try:
        _refuse_unwritable(options)
        return _check(targets, options)
    except TargetError as error:
        print(f"{options.prog}: error: {error}", file=sys.stderr)
        return ExitStatus.USAGE


def _refuse_unwritable(options: Options) -> None:
    """Refuse an output that cannot be written before any check runs, not after."""
    if options.json_path not in (None, "-"):
        path = Path(options.json_path)
        parent = path.parent
        if path.is_dir():
            raise TargetError(f"--json {path}: is a directory; give a file name")
        if not parent.is_dir():
            raise TargetError(
                f"--json {path}: the directory {parent} does not exist; create it first"
            )
        if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise TargetError(f"--json {path}: cannot write there (permission denied)")
    if options.plot is not None:
        from ._checker import plot

        if reason := plot.missing():
            raise TargetError(f"--plot needs {reason}")
        directory = Path(options.plot)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise TargetError(f"--plot {directory}: cannot create the directory: {error}") from None
        if not os.access(directory, os.W_OK):
            raise TargetError(f"--plot {directory}: cannot write there (permission denied)")


def _check(targets: list[str], options: Options) -> int:
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
    names = [n.strip() for item in options.only for n in item.split(",") if n.strip()]
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

    out = sys.stderr if options.json_path == "-" else sys.stdout  # keep stdout pure JSON
    colour = console.wants_colour(out)

    def write(text: str) -> None:
        out.write(console.paint(text) if colour else text)
        out.flush()

    progress = console.Progress(sys.stderr)
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
            count = plural(len(here) - factories, "decorated function")
            extra = f", {plural(factories, 'factory')}" if factories else ""
            write(f"== {module_name}: {count}{extra} ==\n\n")
        if entry.fn is None or entry.example is None:
            where = f" ({entry.location})" if entry.location else ""
            write(f"{entry.name}{where}  no example inputs\n  {entry.missing}\n\n")
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
            entry.fn,
            entry.example,
            only=checks or None,
            name=entry.name,
            progress=progress.show,
            strict=options.strict,
        )
        if entry.generated:
            report.example = f"{report.example}, {entry.generated}"
        plotted = _plot(entry, report, options.plot)
        progress.clear()
        write(f"{report}{plotted}\n\n")
        reports.append((entry.name, report))
        results.append(
            {
                "module": module_name,
                "checked": True,
                "generated_example": bool(entry.generated),
                **report.to_dict(),
            }
        )
    text, summary = console.summary(
        reports,
        [e.name for _, e in runnable if e.generated],
        [e.name for e in missing],
        time.perf_counter() - start,
        strict=options.strict,
        gallery=f"{options.prog} check your_module.py" if targets == [GALLERY] else None,
    )
    write(text + "\n")
    if options.json_path is not None:
        from . import __version__

        document = {
            "schema_version": SCHEMA_VERSION,
            "tf_compat_grad": __version__,
            "targets": targets,
            "checks": checks or list(CHECKS),
            "functions": results,
            "summary": summary,
        }
        payload = json.dumps(document, indent=2, default=str)
        if options.json_path == "-":
            sys.stdout.write(payload + "\n")
        else:
            Path(options.json_path).write_text(payload + "\n", encoding="utf-8")
    return int(summary["exit_status"])


def _plot(entry: Entry, report: Report, directory: str | None) -> str:
    """Draw the function's picture into `directory` (`--plot`); the line naming the file."""
    if directory is None or entry.fn is None or report.rows[0].status is Status.FAIL:
        return ""  # forward, the first check, fails: nothing to draw
    from ._checker import plot

    try:
        path = plot.draw(entry.fn, entry.example, report, Path(directory))
    except Exception as error:
        return f"\n  plot: not drawn ({type(error).__name__}: {error})"
    return f"\n  plot: {path}" if path else ""
