"""What `python -m tf_compat_grad check` writes on a terminal: colour (`NO_COLOR`,
`FORCE_COLOR`), the progress line, and the summary that ends the run."""

from __future__ import annotations

import os
import re
from typing import Any, TextIO

from .._errors import plural
from .._exit_status import ExitStatus
from .report import Report, Status

# --- colour -------------------------------------------------------------------------------

_COLOURS = {"PASS": "32", "WARN": "33", "FAIL": "1;31", "SKIP": "2", "OK": "1;32"}
_STATUS_WORD = re.compile(r"^(  |Result: )(PASS|WARN|FAIL|SKIP|OK)\b", re.MULTILINE)


def wants_colour(stream: TextIO) -> bool:
    """Colour on a terminal; never with `NO_COLOR` set (https://no-color.org), always with
    `FORCE_COLOR` set (https://force-color.org), `NO_COLOR` winning when both are."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return stream.isatty() and os.environ.get("TERM") != "dumb"


def paint(text: str) -> str:
    """The status words of a report or summary (`  FAIL  numerical`, `Result: OK`) coloured."""
    return _STATUS_WORD.sub(lambda m: f"{m[1]}\033[{_COLOURS[m[2]]}m{m[2]}\033[0m", text)


# --- progress -----------------------------------------------------------------------------


class Progress:
    """One progress line on stderr: rewritten in place on a terminal, a line per function
    otherwise (so logs stay readable)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.active = False
        self.prefix = ""

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


# --- the summary --------------------------------------------------------------------------


def summary(
    reports: list[tuple[str, Report]],
    generated: list[str],
    missing: list[str],
    seconds: float,
    *,
    strict: bool,
    gallery: str | None,
) -> tuple[str, dict[str, Any]]:
    """The summary's text and its JSON; `gallery` is the command that checks one's own code,
    when the run checked the bundled gallery."""
    counts = {s.value: 0 for s in Status}
    for _, report in reports:
        for name, n in report.counts().items():
            counts[name] += n
    failing = [(name, r.failed) for name, r in reports if r.failed]
    warning = [(name, r.warned) for name, r in reports if r.warned and not r.failed]
    surrogates = {name: r.surrogate for name, r in reports if r.surrogate}
    head = f"Summary: {plural(len(reports), 'function')} checked in {seconds:.1f} s"
    if generated:
        head += f" ({len(generated)} on generated inputs: {', '.join(generated)})"
    if missing:
        head += f", {len(missing)} without example inputs ({', '.join(missing)})"
    lines = [
        head,
        "  checks: " + ", ".join(f"{n} {s}" for s, n in counts.items()),
        f"  functions: {len(reports) - len(failing) - len(warning)} pass, "
        f"{len(warning)} with warnings, {len(failing)} failing",
    ]
    if surrogates:
        lines.append(
            f"  declared surrogates (their gradient differs from the true derivative on "
            f"purpose): {', '.join(surrogates)}"
        )
    for label, group in (("FAIL", failing), ("WARN", warning)):
        if group:
            lines.append(
                f"  {label}: "
                + "; ".join(f"{name} ({', '.join(checks)})" for name, checks in group)
            )
    if gallery:
        quirks = (
            " and its warnings are quirks they keep on purpose (each function's docstring says "
            "which)"
            if warning
            else ""
        )
        lines.append(
            "This was the bundled gallery (tf_compat_grad.examples): examples ported as their "
            f"sources wrote them, so several declare a surrogate{quirks}. Check your own code "
            f"with `{gallery}`."
        )
    strictly = ", --strict: warnings fail" if strict else ""
    if not reports:
        status = ExitStatus.NOTHING_CHECKED
        lines.append(
            f"Result: NOTHING CHECKED (exit status {status}): no function has example inputs, "
            "and none could be built (see above)"
        )
    elif failing:
        status = ExitStatus.FAILED
        wrong = any(c in ("numerical", "autodiff") for _, checks in failing for c in checks)
        declare = (
            " A gradient that differs from the true derivative on purpose is declared with "
            '`@custom_gradient(surrogate="why")`.'
            if wrong
            else ""
        )
        lines.append(
            f"Result: FAIL (exit status {status}{strictly}): "
            f"{plural(len(failing), 'function')} fail a check; each FAIL row above says what "
            f"is wrong and how to fix it.{declare}"
        )
    else:
        status = ExitStatus.OK
        if warning:
            verdict = (
                f"no gradient is wrong; {plural(len(warning), 'function')} "
                "have warnings worth reading (WARN rows above), which do not fail the run "
                "(--strict makes them fail)"
            )
        else:
            verdict = "every check passed"
        lines.append(f"Result: OK (exit status {status}{strictly}): {verdict}.")
    data = {
        "functions": len(reports),
        "generated_example_inputs": generated,
        "without_example_inputs": missing,
        "counts": counts,
        "failing": [name for name, _ in failing],
        "warning": [name for name, _ in warning],
        "declared_surrogates": surrogates,
        "strict": strict,
        "seconds": round(seconds, 2),
        "exit_status": int(status),
    }
    return "\n".join(lines), data
