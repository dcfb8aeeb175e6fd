"""What many test files share: the dtype they compute in, how the library's messages name a
user's function (one place, so a change of that format is one edit), the links of a Markdown
page, how TF flattens outputs (the port tests compare with TF's flat lists), and the settings
of the derandomized property tests."""

import gc
import os
import re
import types
from collections.abc import Callable
from typing import Any

import torch
from hypothesis import HealthCheck, settings

from tf_compat_grad import custom_gradient
from tf_compat_grad._decoration import wrapper_of

D = torch.float64


def named(fn: Callable[..., Any]) -> str:
    """How a message names a function after the first time: `qualname`. For a decorated
    function, the function it decorates; for a callable with no name (a partial), its repr."""
    fn = getattr(fn, "__wrapped__", fn)
    return f"`{getattr(fn, '__qualname__', None) or repr(fn)}`"


def where(fn: Callable[..., Any]) -> str:
    """How a message first names a function: `qualname` (file:line). For a decorated function,
    the function it decorates; for one with no code of its own (a builtin), its name alone."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is None:
        return named(fn)
    return f"{named(fn)} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


# Markdown links and images, `[text](target)` and `![alt](target)`, and HTML `src=`/`href=`.
_LINK = re.compile(r"\]\(([^)\s]+)\)|(?:src|href)=\"([^\"]+)\"")


def links(markdown: str) -> list[str]:
    """The targets of the links and images of a Markdown text, in order."""
    return [a or b for a, b in _LINK.findall(markdown)]


def flatten(value: Any) -> list[Any]:
    """As `tf.nest.flatten`: dicts in sorted key order, lists and tuples in order."""
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in flatten(value[key])]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def derandomized(max_examples: int) -> settings:
    """Hypothesis settings for a property test that checks the same cases on every run:
    derandomized, no example database, no deadline (CI machines are slow and uneven)."""
    return settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def cyclic_garbage_of(test_module: str) -> list[Any]:
    """What the cyclic collector finds now that this package or the test module `test_module`
    (its `__name__`) made: objects of their classes, and their functions and classes. (What
    torch itself leaves is not theirs: on torch 2.4.1, after some other tests in the same
    process, the collector also finds 127 objects of torch's, `WeakIdKeyDictionary` closures of
    `torch.utils.weak` and captured `traceback.FrameSummary` lists.)"""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()

    def ours(module: Any) -> bool:
        return isinstance(module, str) and module.partition(".")[0] in (
            "tf_compat_grad",
            test_module,
        )

    return [
        o
        for o in found
        if ours(type(o).__module__)
        or (isinstance(o, (types.FunctionType, type)) and ours(getattr(o, "__module__", None)))
    ]


def saved_while_called(fn: Callable[..., Any], *args: Any) -> int:
    """How many tensors autograd saves for backward while `fn(*args)` runs."""
    count = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*args)
    return count[0]


def closure_layer(w: torch.Tensor, b: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """A linear layer that reads its Parameters from its closure: grad_fn gets them as
    `variables`."""

    @custom_gradient
    def layer(x):
        def grad(dy, variables=None):
            return dy @ w, [dy.t() @ x, dy.sum(0)]

        return torch.nn.functional.linear(x, w, b), grad

    return layer


def reach_of(decorated: Any) -> Any:
    """The reach proof (`_reach.ParameterReach`) of a decorated function's eager path."""
    return wrapper_of(decorated)._eager.reach
