"""`python -m tf_compat_grad [check [TARGET ...] [--json FILE] [--only NAME]]` and
`python -m tf_compat_grad port INPUT [-o OUTPUT] [--report REPORT] [--json]`.

With no arguments it checks the bundled gallery, `tf_compat_grad.examples`; see `_cli.py`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (the checker, or the translator); returns the exit status."""
    from ._cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
