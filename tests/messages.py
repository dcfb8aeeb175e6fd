"""The one place that pins the wording of each message tf_compat_grad raises.

One function per message gives its whole text for a user's function and the parts that vary
(what was returned, an argument's path, a count), so a change of wording is one edit here. A
test compares a raised message with `exactly` (the whole message), or with `within` where the
library's message sits inside another error (Dynamo's). `SOME` stands for a part a test cannot
know beforehand, such as the repr of an object the user's function made (it holds an address).

Values are described as the library describes them: `None (NoneType)`, `'abc' (str)`, `Tensor
of shape [2] and dtype torch.float32`; the tests pass those descriptions in.
"""

import re
from collections.abc import Callable, Sequence
from typing import Any

import torch
from helpers import named, where

PREFIX = "tf_compat_grad: "
SOME = "\x00"  # not in any message


def exactly(message: str) -> str:
    """A pattern for `pytest.raises(match=...)` that matches the whole message and nothing more;
    each `SOME` in it matches any text."""
    return rf"\A{within(message)}\Z"


def within(message: str) -> str:
    """A pattern that finds the message anywhere (inside another error's text)."""
    return "(?s:.+)".join(re.escape(part) for part in message.split(SOME))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- how messages name an input --------------------------------------------------------------


def argument(path: str) -> str:
    """A positional input, by its path among the flattened arguments: argument `params['w']`."""
    return f"argument `{path}`"


def variable(index: int, shape: Sequence[int]) -> str:
    """A Parameter f read, by its place in `variables`."""
    return f"`variables[{index}]` (Parameter of shape {list(shape)})"


def _parameters(shapes: Sequence[Sequence[int]]) -> str:
    return ", ".join(f"Parameter of shape {list(shape)}" for shape in shapes)


# --- calling f: its arguments and what it returns --------------------------------------------


def strided_nested(f: Callable[..., Any], path: str) -> str:
    return (
        f"{PREFIX}{where(f)} got a strided nested tensor for positional argument `{path}`; an "
        "autograd.Function cannot take one as an input. Pass its components as a list of "
        "tensors, or use a jagged nested tensor (`layout=torch.jagged`)."
    )


def unusable_argument(f: Callable[..., Any], got: str, path: str) -> str:
    return (
        f"{PREFIX}{where(f)} got {got} for positional argument `{path}`. Positional arguments "
        "are the inputs of a custom gradient and must be tensors, Python numbers, strings or "
        "numpy arrays, possibly nested in lists, tuples, dicts and namedtuples (TensorFlow: "
        "'Attempt to convert a value ... with an unsupported type ... to a Tensor'). Pass it by "
        "keyword instead: keyword arguments reach f but are not inputs."
    )


def single_tensor(f: Callable[..., Any], got: str) -> str:
    """f returned one tensor of length 2 (TensorFlow unpacks it, then finds no grad_fn)."""
    return (
        f"{PREFIX}{where(f)} must return a pair (outputs, grad_fn), but it returned a single "
        f"{got}. Return `y, grad_fn`."
    )


def unpacks(f: Callable[..., Any], got: str, count: int) -> str:
    """f returned a sequence (`got`: its type's name) or a tensor of another length."""
    return (
        f"{PREFIX}{where(f)} must return a pair (outputs, grad_fn), but it returned {got}, which "
        f"unpacks into {_plural(count, 'item')}. Return `y, grad_fn`; put several outputs in a "
        "tuple: `(y1, y2), grad_fn`."
    )


def not_a_pair(f: Callable[..., Any], got: str) -> str:
    """f returned something that does not unpack at all."""
    return (
        f"{PREFIX}{where(f)} must return a pair (outputs, grad_fn), but it returned {got}. "
        "Return `y, grad_fn`, where grad_fn takes the upstream gradients and returns the input "
        "gradients."
    )


def grad_fn_not_callable(f: Callable[..., Any], got: str) -> str:
    return (
        f"{PREFIX}the second item returned by {where(f)} must be its gradient function "
        f"(grad_fn), but it is {got}, which is not callable (TensorFlow: 'unsupported "
        "callable'). Return `y, grad_fn` with `def grad_fn(dy): ...` defined inside f."
    )


def unusable_output(f: Callable[..., Any], got: str, path: str) -> str:
    return (
        f"{PREFIX}{where(f)} returned {got} as output `{path}`. Outputs must be tensors or "
        "Python numbers, possibly nested in lists, tuples, dicts and namedtuples."
    )


def edited_in_place(f: Callable[..., Any], path: str) -> str:
    """f edited its argument `path`, which requires grad, in place."""
    return (
        f"{PREFIX}{where(f)} edited its argument `{path}` in place (an in-place op such as "
        "`mul_`, an indexed assignment or `out=`). The caller's tensor would change under "
        "autograd: the gradient through the edit would join the one grad_fn gives for the "
        "argument as it was passed, or, for an edit under `torch.no_grad()`, later uses of the "
        "tensor would be differentiated as if it had not changed. Edit a copy (`.clone()` it in "
        "f first), or compute a new tensor."
    )


def variables_keyword(f: Callable[..., Any], count: int, names: str) -> str:
    """f read `count` Parameters it was not passed (`names`: as the code reaches them)."""
    return (
        f"{PREFIX}grad_fn of {where(f)} must accept keyword argument 'variables', since "
        f"function uses variables: {named(f)} reads {_plural(count, 'trainable Parameter')} "
        f"that it is not passed ({names}). Define `def grad_fn(*upstream, variables=None)` and "
        "return `(input_grads, [one gradient per variable])`, or pass the Parameters as "
        "positional arguments."
    )


def lost_under_compile(f: Callable[..., Any]) -> str:
    """Under torch.compile(fullgraph=True): f's output is computed from a tensor that requires
    grad and that f was not given, which only a call outside the graph can check."""
    return (
        f"{PREFIX}the output of {where(f)} is computed from a tensor that requires grad but is "
        "neither a positional argument nor a variable (a closure cell, a global, a keyword "
        "argument, an attribute read through an object), and torch.compile cannot read the "
        "graph that tells whether its gradient would be lost, so the call is checked outside "
        "the compiled graph (a graph break; this error under fullgraph=True). Pass the tensor "
        "as a positional argument and return its gradient from grad_fn, or decorate with "
        '`@custom_gradient(captured="constant")` to keep TensorFlow\'s behaviour (no gradient '
        "for it through the outputs; for a tensor computed from the inputs alone, whose "
        "gradient grad_fn gives, no number changes)"
    )


def parametrized_under_compile(f: Callable[..., Any]) -> str:
    """Under torch.compile(fullgraph=True): f is a method of a module with a parametrized
    weight, which only a call outside the graph gives the chain rule."""
    return (
        f"{PREFIX}{where(f)} is a method of a module with a parametrized weight "
        "(torch.nn.utils.parametrize, parametrizations.*), whose originals get the weight's "
        "gradient through the parametrization only in eager mode, so the call runs outside the "
        "compiled graph (a graph break; this error under fullgraph=True). Compile without "
        "fullgraph=True, or read the weight in an undecorated forward and pass it to the "
        "decorated function as a positional argument"
    )


def lost_gradient(f: Callable[..., Any], what: str, computed_from: str | None = None) -> str:
    """f's output depends on `what` (`closure `w``, `keyword `scale``, `` `self.weight` ``), a
    tensor that requires grad and is neither an input nor a variable; `computed_from`: the
    leaf whose gradient is lost (`` `self.weight_v` ``, `the tensor of shape [3]`), when it is
    not that tensor itself."""
    target = "it" if computed_from is None else f"{computed_from}, which it is computed from,"
    return (
        f"{PREFIX}the output of {where(f)} depends on {what}, a tensor that requires grad but "
        "is neither a positional argument nor a variable (a Parameter read without being "
        f"passed): the gradient that would flow through the output into {target} would be "
        "lost, since that gradient goes through grad_fn to the positional arguments and "
        "variables only. Pass the tensor as a positional argument and return its gradient from "
        'grad_fn, or decorate with `@custom_gradient(captured="constant")` to keep TensorFlow\'s '
        "behaviour (no gradient for it through the function's outputs, while grad_fn's own use "
        "of it is still differentiated at second order). `.detach()` where the function reads "
        "it gives the same first-order gradients, but also detaches grad_fn's use of it."
    )


def lost_gradient_without_inputs(
    f: Callable[..., Any], what: str, computed_from: str | None = None
) -> str:
    """The same with `captured="constant"` when no positional argument or variable requires
    grad, so that TensorFlow would differentiate f's own ops."""
    target = "it" if computed_from is None else f"{computed_from}, which it is computed from,"
    return (
        f"{PREFIX}the output of {where(f)} depends on {what}, a tensor that requires grad but "
        "is neither a positional argument nor a variable (a Parameter read without being "
        "passed), and no positional argument or variable requires grad. With "
        '`captured="constant"` it is a constant of the function, but with nothing to record '
        f"TensorFlow would differentiate the function's own ops into {target} and never call "
        "grad_fn. Pass a tensor that requires grad as a positional argument, or `.detach()` the "
        "tensor where the function reads it, or call the function under `torch.no_grad()`."
    )


# --- what grad_fn returns --------------------------------------------------------------------


def count(f: Callable[..., Any], returned: int, inputs: Sequence[str]) -> str:
    """grad_fn returned `returned` gradients for the positional inputs named `inputs`."""
    return (
        f"{PREFIX}grad_fn of {where(f)} returned {_plural(returned, 'gradient')}, but "
        f"{named(f)} was called with {_plural(len(inputs), 'positional input')} "
        f"({', '.join(inputs) or 'none'}). Return one gradient per positional input (None for "
        "one that needs none), in the order of the flattened arguments."
    )


def not_a_gradient(
    f: Callable[..., Any], got: str, target: str, dtype: torch.dtype = torch.float64
) -> str:
    """`target` (`argument`, `variable`) of dtype `dtype` got `got`."""
    real = "" if dtype.is_complex else "real "
    return (
        f"{PREFIX}grad_fn of {where(f)} returned {got} as the gradient for {target}, a tensor of "
        f"dtype {dtype}. Expected a tensor, a {real}Python number, a numeric numpy array or "
        "None. Return a tensor of the input's shape, or None for no gradient."
    )


def meta_gradient(f: Callable[..., Any], target: str, device: str) -> str:
    return (
        f"{PREFIX}grad_fn of {where(f)} returned a gradient on the meta device, which holds no "
        f"data, for {target}, which is on {device}. Return a gradient with data (on {device}, "
        "or any device: it is moved)."
    )


def wrong_shape(
    f: Callable[..., Any], got: Sequence[int], target: str, shape: Sequence[int]
) -> str:
    return (
        f"{PREFIX}grad_fn of {where(f)} returned a gradient of shape {list(got)} for {target}, "
        f"which has shape {list(shape)}. A gradient must have its input's shape, or be a "
        "broadcast of it (it is then summed down), or be a Python number or 0-d tensor (one "
        f"value for every element). Return a gradient of shape {list(shape)}."
    )


def variables_not_a_pair(f: Callable[..., Any], shapes: Sequence[Sequence[int]], got: str) -> str:
    """f read Parameters of `shapes`; grad_fn did not return `(input_grads, variable_grads)`."""
    return (
        f"{PREFIX}grad_fn of {where(f)} must return a pair (input_gradients, "
        f"variable_gradients) because {named(f)} reads {_plural(len(shapes), 'Parameter')} "
        f"({_parameters(shapes)}), but it returned {got}. Return `dx, [dw, ...]` with one "
        "gradient per entry of `variables`."
    )


def variables_not_a_list(f: Callable[..., Any], shapes: Sequence[Sequence[int]], got: str) -> str:
    return (
        f"{PREFIX}grad_fn of {where(f)} must return the variables' gradients as a list: "
        f"expected a list of {len(shapes)} ({_parameters(shapes)}), got {got}. Return `dx, "
        "[dw, ...]`, one entry per Parameter in `variables`, in that order (None for none)."
    )


def variables_count(f: Callable[..., Any], shapes: Sequence[Sequence[int]], returned: int) -> str:
    return (
        f"{PREFIX}grad_fn of {where(f)} must return a gradient for each variable: expected a "
        f"list of {len(shapes)} ({_parameters(shapes)}), got {_plural(returned, 'gradient')}. "
        "Return one entry per Parameter in `variables`, in that order (None for none)."
    )


# --- what is decorated, and pickling ---------------------------------------------------------


def _not_decoratable(given: str, why: str) -> str:
    return (
        f"{PREFIX}custom_gradient decorates a function that returns (outputs, grad_fn), but it "
        f"was given {given}, which is {why}. Decorate a function, a method, a staticmethod or a "
        "classmethod (the decorator above or below @staticmethod / @classmethod)."
    )


def decorated_class(cls: type) -> str:
    return _not_decoratable(f"the class `{cls.__qualname__}`", "not a function")


def decorated_value(got: str) -> str:
    """A value that is not callable, described as `got`."""
    return _not_decoratable(got, "not callable")


def cannot_pickle(f: Callable[..., Any]) -> str:
    """A decorated function whose module and qualified name do not lead back to it."""
    inner = getattr(f, "__wrapped__", f)
    return (
        f"{PREFIX}cannot pickle {where(f)}: pickle saves a function by reference, as its module "
        f"and qualified name, and `{inner.__module__}.{inner.__qualname__}` does not lead to it "
        "(a function defined inside another function, a lambda, or a name bound to something "
        "else since). Define it at the top level of a module, or as a method of a class there, "
        "so that another process can import it."
    )


# --- transforms, compilation and tracing -----------------------------------------------------


def jit_trace(f: Callable[..., Any]) -> str:
    """`f`: the function the user decorated (or a partial), as the user wrote it."""
    return (
        f"{PREFIX}torch.jit.trace cannot trace {where(f)}: a traced graph keeps the ops the "
        "decorated function runs but not its grad_fn, so a gradient through the graph would not "
        "be the custom one. To deploy the model, export it with `torch.export.export(model, "
        "args)` instead (the exported program computes the outputs, and no gradient)."
    )


def script(f: Callable[..., Any]) -> str:
    """`torch.jit.script` of a decorated function, or of a module with a decorated method."""
    return (
        f"{PREFIX}torch.jit.script cannot compile {where(f)}: TorchScript compiles a "
        "function's source into its own graph, which has no place for a grad_fn written in "
        "Python, so the custom gradient would be lost. Keep the model in Python "
        "(`torch.compile` compiles it with its custom gradients), or deploy it with "
        "`torch.export.export(model, args)` (the exported program computes the outputs)."
    )


def decorated_while_compiling(described: str) -> str:
    """custom_gradient called while torch.compile traces the code that calls it, on the
    function `described` as `where` describes one."""
    return (
        f"{PREFIX}custom_gradient decorates {described} while torch.compile traces the code that "
        "decorates it, and a decoration makes classes that torch.compile cannot trace, so it "
        "runs outside the graph (a graph break; an error under fullgraph=True), on every call. "
        "Decorate the function once, outside the compiled code: at the top level of a module, "
        "or as a method of the class (`@custom_gradient def forward(self, x)`)"
    )


def exported_backward(f: Callable[..., Any]) -> str:
    """A backward through a decorated call in a program made by torch.export (Note [export])."""
    return (
        f"{PREFIX}backward reached {where(f)} in a program made by torch.export, which records "
        "the function's forward ops and not its grad_fn, so the gradient would be wrong (none, "
        "or autodiff of the forward). Exported programs are for inference: differentiate the "
        "module itself (torch.compile it to train compiled), or run the exported program under "
        "`torch.no_grad()` or with inputs and Parameters that do not require grad"
    )


def jvp_reentered(f: Callable[..., Any]) -> str:
    """f's rule in jvp reached f's jvp again (a grad_fn calling decorated functions)."""
    return (
        f"{PREFIX}forward mode through {where(f)} reached its own forward-mode rule again "
        "while applying it: its grad_fn calls a decorated function that (itself, or through "
        f"another grad_fn) calls {named(f)}, and under a `torch.func` forward-mode transform "
        "each of those calls applies its rule again, without end. It is refused rather than "
        "left to fail with a RecursionError. Use reverse mode for the inner derivative: "
        "`torch.func.hessian` or `jacrev(jacrev(f))` instead of `jacrev(jacfwd(f))`."
    )


def upstreams_not_taken(
    f: Callable[..., Any], grad_fn: Callable[..., Any], n: int, problem: str, variables: bool
) -> str:
    """f returned `n` outputs; its grad_fn cannot take `n` upstream gradients."""
    return (
        f"{PREFIX}{where(f)} returned {_plural(n, 'output')}, so its grad_fn is called with "
        f"{_plural(n, 'upstream gradient')}, one per flattened output in order"
        f"{' and `variables=`' if variables else ''}, but grad_fn {where(grad_fn)} cannot take "
        f"them ({problem}). Give grad_fn one parameter per output, `def grad_fn(d_y1, d_y2):`, "
        "or take them all as `def grad_fn(*upstream):`."
    )


def forward_over_forward(f: Callable[..., Any]) -> str:
    return (
        f"{PREFIX}forward mode over forward mode (e.g. `jacfwd(jacfwd(f))`) through {where(f)} "
        "would lose the second-order terms of the tensors its grad_fn closes over, so it is "
        "refused rather than computed wrong. Use `torch.func.hessian` (forward over reverse) or "
        "`jacrev(jacrev(f))` instead."
    )


def under_transform(f: Callable[..., Any]) -> str:
    """Why Dynamo refuses (under `fullgraph=True`) a call under a `torch.func` transform."""
    return (
        f"{PREFIX}{where(f)} is called under a torch.func transform (grad, vjp, jvp, jacrev, "
        "vmap, ...) inside torch.compile, which would differentiate its forward instead of its "
        "grad_fn, so the call runs outside the compiled graph (a graph break). Call "
        "torch.compile without fullgraph=True, or apply the transform outside the compiled "
        "function: `torch.func.grad(torch.compile(f))`"
    )


def older_torch_reason(f: Callable[..., Any]) -> str:
    """Why Dynamo refuses (under `fullgraph=True`) any call on a torch before 2.13."""
    return (
        f"{PREFIX}{where(f)} runs outside torch.compile on torch {torch.__version__}, whose "
        "compiler cannot trace the watch for the Parameters it reads. Call torch.compile "
        "without fullgraph=True (the call is a graph break and runs as in eager mode, with the "
        "same gradients), export with `torch.export.export(..., strict=False)`, or upgrade to "
        "torch >= 2.13 for one graph"
    )


def older_torch_transform(f: Callable[..., Any]) -> str:
    """A call under a `torch.func` transform inside torch.compile, on a torch before 2.13."""
    return (
        f"{PREFIX}{where(f)} is called under a torch.func transform (grad, vjp, jvp, vmap, ...) "
        f"inside torch.compile. On torch {torch.__version__} the call must leave the compiled "
        "graph, and this compiler then fails on the transform's tensors (an internal "
        "assertion, or a wrong result) as it resumes inside the transform. Run the transform "
        "without torch.compile (it follows the custom rule), or upgrade to torch >= 2.13, "
        "where the call leaves the graph safely"
    )


# --- the checker's usage errors --------------------------------------------------------------


def unknown_checks(unknown: Sequence[str], checks: Sequence[str]) -> str:
    """`run_checks(..., only=...)` named checks that are not among `checks`."""
    return (
        f"{PREFIX}unknown check(s) {', '.join(map(repr, unknown))}; the checks are "
        f"{', '.join(checks)}"
    )


def check_needs_example(fn: Callable[..., Any]) -> str:
    """`check(fn)` with no example inputs given or attached."""
    return (
        f"{PREFIX}check() needs example inputs for {fn!r}: pass them, as in `check(fn, "
        "torch.randn(3))`, or attach them with `@custom_gradient(example=lambda: "
        "(torch.randn(3),))`"
    )
