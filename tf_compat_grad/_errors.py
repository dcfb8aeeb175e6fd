"""The library's exceptions and the helpers that word their messages.

Every exception keeps the builtin type TensorFlow raises for the same mistake (`ValueError` for
counts, `TypeError` for signatures and unusable values), so `except ValueError` keeps working.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

PREFIX = "tf_compat_grad: "


class CustomGradientError(Exception):
    """Base class of the errors raised by tf_compat_grad (never by the user's own code)."""


class CustomGradientTypeError(CustomGradientError, TypeError):
    """A value or a signature of the wrong kind (TensorFlow raises `TypeError` here too)."""


class CustomGradientValueError(CustomGradientError, ValueError):
    """A value of the right kind but the wrong count or shape (TensorFlow: `ValueError`)."""


class CustomGradientNotImplementedError(CustomGradientError, NotImplementedError):
    """A combination that cannot be computed exactly, refused rather than computed wrong."""


def fn_name(fn: Callable[..., Any]) -> str:
    """A user's function by name, in backquotes."""
    label = getattr(fn, "__qualname__", None)
    if not isinstance(label, str):  # traced, Dynamo reads a function's as its descriptor
        label = getattr(getattr(fn, "__code__", None), "co_qualname", None)
    label = label or getattr(fn, "__name__", None) or repr(fn)
    return f"`{label}`"


def describe(fn: Callable[..., Any]) -> str:
    """A user's function by name, with its file and line: `log1pexp` (model.py:12)."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        return fn_name(fn)
    return f"{fn_name(fn)} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def describe_value(value: object) -> str:
    """A short description of a value for 'expected ..., got ...' messages."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{type(value).__name__} of shape {list(shape)} and dtype {dtype}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"


def bug(what: str) -> AssertionError:
    """An internal invariant that failed: never the user's fault."""
    return AssertionError(f"{PREFIX}{what}. This is a bug in tf_compat_grad, please report it.")
