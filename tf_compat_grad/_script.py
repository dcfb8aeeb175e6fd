"""`torch.jit.script` of a decorated function or of a module class with a decorated method: refused
by name.

Note [TorchScript]
`torch.jit.script` compiles a function's source into its own graph, which has no place for a
grad_fn written in Python (a closure, a lambda): it failed inside this file (`*args`) or on the
user's grad_fn, naming neither the function nor the way out. It calls `__prepare_scriptable__`
on the object it scripts and on every module in it first: the wrapper refuses there (the
function `custom_gradient` returns for a plain function holds the wrapper's), and so does a
module class with a decorated method (one it does not define itself). A module that calls a
decorated function keeps it as a call to Python, with its custom gradient (that function is
marked `torch.jit.ignore`, which a scripted caller calls as Python).
"""

from __future__ import annotations

from typing import NoReturn

import torch

from ._errors import PREFIX, CustomGradientNotImplementedError, bug, describe


def refuse_script(module: torch.nn.Module) -> NoReturn:
    """`__prepare_scriptable__` of a module class with a decorated method (Note
    [TorchScript])."""
    for klass in type(module).__mro__:
        for attribute in vars(klass).values():
            if getattr(attribute, "__tf_compat_grad__", None) is not None:
                refuse_function(describe(attribute.__wrapped__))
    raise bug("a module class holds `refuse_script` but no decorated method")


def refuse_function(described: str) -> NoReturn:
    """`torch.jit.script` of the decorated function `described` names (`describe`): refused
    (Note [TorchScript]). `__prepare_scriptable__` of the function `custom_gradient` returns,
    bound to its description."""
    raise CustomGradientNotImplementedError(
        f"{PREFIX}torch.jit.script cannot compile {described}: TorchScript compiles a "
        "function's source into its own graph, which has no place for a grad_fn written in "
        "Python, so the custom gradient would be lost. Keep the model in Python "
        "(`torch.compile` compiles it with its custom gradients), or deploy it with "
        "`torch.export.export(model, args)` (the exported program computes the outputs)."
    )
