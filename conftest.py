"""Collection settings for the whole repository: the tests and the package's doctests."""

import importlib.util
from pathlib import Path

_ROOT = Path(__file__).resolve().parent

# The port corpus is TensorFlow source, the input of tests/test_port.py (and of its recorder,
# record_tf.py), not modules to import under doctest collection.
collect_ignore = ["tests/port_corpus"]

# The translator's transformer imports libcst, an optional dependency (the `port` extra, also in
# `test`): without libcst the modules that import it cannot be imported, so doctest collection
# leaves them out.
if importlib.util.find_spec("libcst") is None:
    collect_ignore += [
        str(path.relative_to(_ROOT))
        for path in sorted((_ROOT / "tf_compat_grad" / "_port").glob("*.py"))
        if "import libcst" in path.read_text()
    ]
