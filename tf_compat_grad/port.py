"""`port_source`: translate TensorFlow custom-gradient code into PyTorch code that uses this
library, with a report of what was translated and what was left for a person, and why.

Needs libcst (`pip install "tf-compat-grad[port]"`); `import tf_compat_grad` does not import it. The
translation table is `tf_compat_grad._port._table`, rendered in docs/migrating_from_tensorflow.md.
"""

from __future__ import annotations

from ._port._report import MARK as MARK
from ._port._report import Entry as Entry
from ._port._report import PortResult as PortResult

__all__ = ["INSTALL_HINT", "MARK", "Entry", "PortDependencyError", "PortResult", "port_source"]

INSTALL_HINT = 'pip install "tf-compat-grad[port]"'
"""The command that installs what the translator needs."""


class PortDependencyError(ImportError):
    """libcst, which the translator needs, is not installed."""


def port_source(text: str, filename: str = "<input>") -> PortResult:
    """Translate the TensorFlow source `text` (named `filename` in errors).

    Raises `PortDependencyError` without libcst, and `ValueError` (naming the file, line and
    column) when `text` is not valid Python.
    """
    try:
        from ._port._transform import port_module
    except ImportError as error:
        if error.name != "libcst" and not (error.name or "").startswith("libcst."):
            raise
        raise PortDependencyError(
            f"tf_compat_grad port needs libcst, which is not installed: {INSTALL_HINT}"
        ) from error
    return port_module(text, filename)
