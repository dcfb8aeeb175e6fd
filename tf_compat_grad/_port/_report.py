"""What a port returns: the translated code and one report entry per TensorFlow construct."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

MARK = "# tf_compat_grad port:"  # starts the comment left at each line that is not translated
KEPT = "kept:"  # starts the reason of a tensorflow import kept for the uses left untranslated


@dataclass(frozen=True)
class Entry:
    """One TensorFlow construct met: translated (into `torch`) or flagged (for `why`)."""

    line: int  # in the input
    function: str  # the enclosing function's dotted name, or "<module>"
    status: Literal["translated", "flagged"]
    tf: str  # what was met: `tf.reduce_sum`, `import tensorflow as tf`
    torch: str = ""  # what it became
    why: str = ""  # why it was left untranslated


@dataclass(frozen=True)
class PortResult:
    """The translated source and the report.

    >>> result = PortResult("x = 1\\n", (Entry(3, "f", "flagged", "tf.foo", why="unknown"),))
    >>> print(result.text("model.py"))
    model.py: 0 translated, 1 flagged (look for '# tf_compat_grad port:' in the output)
    f
      line 3: tf.foo NOT TRANSLATED: unknown
    """

    code: str
    entries: tuple[Entry, ...]

    @property
    def translated(self) -> list[Entry]:
        return [e for e in self.entries if e.status == "translated"]

    @property
    def flagged(self) -> list[Entry]:
        return [e for e in self.entries if e.status == "flagged"]

    def text(self, source: str = "<input>") -> str:
        """The report, grouped by function in order of first appearance."""
        counts = f"{len(self.translated)} translated, {len(self.flagged)} flagged"
        hint = f" (look for '{MARK}' in the output)" if self.flagged else ""
        lines = [f"{source}: {counts}{hint}"]
        groups: dict[str, list[Entry]] = {}
        for entry in self.entries:
            groups.setdefault(entry.function, []).append(entry)
        for function, entries in groups.items():
            lines.append(function)
            for e in entries:
                if e.status == "translated":
                    lines.append(f"  line {e.line}: {e.tf} -> {e.torch}")
                else:
                    lines.append(f"  line {e.line}: {e.tf} NOT TRANSLATED: {e.why}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "translated": len(self.translated),
            "flagged": len(self.flagged),
            "entries": [asdict(e) for e in self.entries],
        }
