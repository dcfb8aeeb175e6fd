"""Write the translation table of `python -m tf_compat_grad port` into the migration guide.

    python3 .ci/port_table.py           # rewrite docs/migrating_from_tensorflow.md
    python3 .ci/port_table.py --check   # exit 1 if the guide's table is out of date

The table is data in tf_compat_grad/_port/_table.py; the guide holds its rendering between the
`port-table` marker comments, and tests/test_port.py checks that the two agree.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tf_compat_grad._port._table import with_guide_table  # noqa: E402

GUIDE = ROOT / "docs" / "migrating_from_tensorflow.md"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check, write nothing")
    args = parser.parse_args()
    text = GUIDE.read_text(encoding="utf-8")
    updated = with_guide_table(text)
    if args.check:
        if updated != text:
            print(f"{GUIDE}: the translation table is out of date: run python3 .ci/port_table.py")
            return 1
        return 0
    GUIDE.write_text(updated, encoding="utf-8")
    print(f"wrote the translation table into {GUIDE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
