"""Where a compiled decorated call leaves the graph: the reasons Dynamo shows (an error under
`fullgraph=True`), the eager checks run outside the graph (`outside`), and a call that left it
on older torch (`call_older_compile`).

# Note [upstreams under compile]
A multi-output f whose grad_fn cannot take one upstream per output is refused when f returns
(`check_upstreams`). Dynamo cannot trace `inspect.signature`, nor read the defaults of a function
defined in the traced code, but it reads code, and the defaults of functions defined outside:
`parameters_of` reads what the upstreams will be bound to (a plain function; a
`functools.partial`'s function, its arguments and keywords; a bound method's function; a
callable object's `__call__`), and `upstreams_refusal_of_code` runs as Python while Dynamo
traces, refusing what no unknown defaults can change: too many upstreams, too few for a
function without positional defaults, the upstreams against `variables`. The refusal is a graph
break, an error under `fullgraph=True` that shows the message (naming grad_fn's code); without
it, `check_upstreams` raises eager's own error outside the graph. A grad_fn defined in the
traced code with defaults that would miss an upstream fails in backward, with eager's
refusal (`Record.gradients`). So `parameters_of` reads no defaults of a function defined inside
another (`CO_NESTED` among its code's flags): torch 2.13's Dynamo fails with its own
AssertionError reading them where there are some (`def grad(d1, d2, variables=None)`).

# Note [parametrizations under compile]
A parametrized weight that f reads is the variable, and its originals get its gradient through
the parametrization (Note [lost gradients] in `_captures.py`), which needs the parametrize cache
that a watched eager call opens: under compile the originals would be the variables and get
grad_fn's gradient of the weight as theirs. So a method of a module that holds a parametrized
weight runs outside the compiled graph, as in eager mode (a graph break; under `fullgraph=True`
an error naming f and the fix). The check reads the module's structure while Dynamo traces,
which guards on it: no cost when the graph runs.

# Note [edits in place under compile]
A call whose f edits an argument that requires grad in place is refused (`check_unedited` in
`_run.py`), eager mode comparing the tensor's `_version` before and after f. Traced, `_version`
is a new unknown SymInt at each read, which no branch can compare; but Dynamo runs each traced op
on fake tensors, whose own version counters count the in-place ops (`mul_`, an indexed
assignment, `out=`). So a compiled call hands `comptime` (Dynamo runs the function it is given
as Python while tracing, and nothing when the code runs) `edits_checked` before and after f
(through `returned_checks` in `_compile_node.py`, which also reads `split`'s checks: one
function, one guard): the first call notes the fake versions of the frame's `inputs` on
Dynamo's translator of that frame, the second compares and keeps eager's message, which
`returned_checks` then returns as a constant of the graph. Where an input was edited, `refuse_edited` breaks the graph (under
`fullgraph=True`, the error shows the message) and raises eager's error outside it. In the
node whose forward runs f (Note [f inside the compile node] in `_compile_node.py`) the break
sends the call to the route of Note [compile], which refuses it so. Where `call_compiled`'s
frame runs as Python (a graph break in f, inside its `try`), `comptime` calls its second
function instead, which notes the real versions, and `check_unedited` refuses as eager mode
does. The good path pays no guard of its own (`returned_checks` is read for `split`'s checks
too; `comptime` costs none, imported where it is called). Where Dynamo resumed a frame after f (`nested_graph_breaks`, off by default) the
versions before f would be another trace's, and nothing is compared.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, NoReturn

import torch
from torch.nn.utils import parametrize

from ._errors import (
    PREFIX,
    CustomGradientNotImplementedError,
    CustomGradientTypeError,
    CustomGradientValueError,
    describe,
)
from ._export import call_exported
from ._record import check_upstreams, upstreams_refusal_of_code
from ._run import edited_message, positional_names
from ._structure import leaf_paths
from ._torch_internals import (
    functorch_transforms_active,
    graph_break,
    is_exporting,
    older_torch_transform_error,
    outside_compile,
    run_while_tracing,
    traced_view,
)

# The eager checks, run where the graph breaks (Notes [lost gradients under compile] and
# [upstreams under compile]).
outside = outside_compile(f"{PREFIX}a decorated call runs outside the compiled graph")

# Dynamo reads grad_fn's code but cannot trace `inspect.signature`: the check runs as Python,
# once per traced call site, its message a constant of the graph.
upstreams_refusal = run_while_tracing(upstreams_refusal_of_code)


def call_older_compile(
    f: Callable[..., Any],
    call_eager: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    """A call that left Dynamo on torch < 2.13 (through the decoration's
    `outside_older_compile`), run as in eager mode, unless a `torch.func` transform is active
    (Note [compile on older torch]) or `torch.export` traces it (Note [export] in
    `_export.py`)."""
    if functorch_transforms_active():
        raise CustomGradientNotImplementedError(older_torch_transform_error(f))
    if is_exporting():
        return call_exported(f, bound, args, kwargs)
    return call_eager(bound, args, kwargs)


def parametrized(bound: Any) -> bool:
    """Whether a method's instance holds a parametrized weight (Note [parametrizations under
    compile])."""
    return isinstance(bound, torch.nn.Module) and any(
        parametrize.is_parametrized(module) for module in bound.modules()
    )


def parametrized_reason(described: str) -> str:
    """Why such a call runs outside the compiled graph; `described`: f by name, file, line."""
    return (
        f"{PREFIX}{described} is a method of a module with a parametrized weight "
        "(torch.nn.utils.parametrize, parametrizations.*), whose originals get the weight's "
        "gradient through the parametrization only in eager mode, so the call runs outside the "
        "compiled graph (a graph break; this error under fullgraph=True). Compile without "
        "fullgraph=True, or read the weight in an undecorated forward and pass it to the "
        "decorated function as a positional argument"
    )


def parameters_of(
    grad_fn: Any,
) -> tuple[types.CodeType, int | None, int, tuple[str, ...]] | None:
    """What Dynamo can read of grad_fn's parameters, as `upstreams_refusal_of_code` takes it:
    the code of the function it calls, how many positional defaults that has (None: unknown,
    as for a function defined in the traced code whose defaults are set), and the positional
    arguments and keywords bound before the upstreams; None for a grad_fn without code."""
    n_bound, keywords = 0, ()
    kind = _function_kind(type(grad_fn))
    if kind == "partial":
        n_bound, keywords = len(grad_fn.args), tuple(grad_fn.keywords)
        grad_fn = grad_fn.func
        kind = _function_kind(type(grad_fn))
    if kind == "method":
        n_bound, grad_fn = n_bound + 1, grad_fn.__func__
    elif kind != "function":  # a callable object
        call: Any = getattr(type(grad_fn), "__call__", None)  # noqa: B004 (its code is read)
        if _function_kind(type(call)) != "function":
            return None
        return call.__code__, len(call.__defaults__ or ()), n_bound + 1, keywords
    code = grad_fn.__code__
    if code.co_flags & 0x10:  # `inspect.CO_NESTED` (a literal: a global read costs a guard)
        return code, None, n_bound, keywords  # maybe made in the traced code
    return code, 0 if grad_fn.__defaults__ is None else None, n_bound, keywords


@run_while_tracing
def _function_kind(kind: type) -> str:
    """What `parameters_of` reads of a callable of this type, read from the class while Dynamo
    traces (Note [compile guards])."""
    if kind is functools.partial:
        return "partial"
    if kind is types.MethodType:
        return "method"
    return "function" if kind is types.FunctionType else "object"


def refuse_upstreams(
    f: Callable[..., Any],
    grad_fn: Callable[..., Any],
    n_outputs: int,
    variables: list[torch.nn.Parameter],
    refusal: str,
) -> NoReturn:
    """The refusal of Note [upstreams under compile], outside Dynamo: eager's, which names
    grad_fn as it is (a partial, a callable object), or else the one made while tracing."""
    check_upstreams(f, grad_fn, n_outputs, variables)
    raise CustomGradientTypeError(refusal)


def upstreams_checked(
    f: Callable[..., Any],
    grad_fn: Callable[..., Any],
    n_outputs: int,
    variables: list[torch.nn.Parameter],
    described: str,
) -> None:
    """Note [upstreams under compile], for a call with several outputs
    and a tensor that requires grad: a graph break where grad_fn cannot take the upstreams."""
    readable = parameters_of(grad_fn)
    # (`__len__`: each builtin read costs a guard: Note [compile guards] in `_compile.py`)
    passed = variables.__len__() > 0
    refusal = readable and upstreams_refusal(*readable, n_outputs, passed, described)
    if refusal:
        graph_break(refusal)  # under fullgraph=True, the error
        outside(refuse_upstreams, f, grad_fn, n_outputs, variables, refusal)


def under_transform_reason(f: Callable[..., Any]) -> str:
    """Why a call of f under a `torch.func` transform leaves the compiled graph, for Dynamo's
    error under `fullgraph=True` (Note [compile under torch.func])."""
    return (
        f"{PREFIX}{describe(f)} is called under a torch.func transform (grad, vjp, jvp, jacrev, "
        "vmap, ...) inside torch.compile, which would differentiate its forward instead of its "
        "grad_fn, so the call runs outside the compiled graph (a graph break). Call "
        "torch.compile without fullgraph=True, or apply the transform outside the compiled "
        "function: `torch.func.grad(torch.compile(f))`"
    )


# Note [edits in place under compile]: the message `edits_checked` found, until read.
_FOUND: list[str] = []
_NOTED = "_tf_compat_grad_versions"  # where the versions before f are kept on the translator


def edits_checked(ctx: Any = None) -> str:
    """Given to `comptime` (with Dynamo's context), called before and after f in a frame with
    the locals `inputs` (the call's tensor inputs), `f`, `layout` (starting with bound, spec,
    number of arguments and tensor positions) and `described` (f by name, file and line): notes
    the versions, then compares them. Called after that without a context: the message of the
    edit found, else "". Both through `returned_checks` in `_compile_node.py` (one guard)."""
    if ctx is None:
        return _FOUND.pop() if _FOUND else ""
    frame, fakes, code = traced_view(ctx, "inputs", "f")
    noted = getattr(frame, _NOTED, None)
    if noted is None:  # before f
        setattr(frame, _NOTED, [t._version for t in fakes])
        return ""
    delattr(frame, _NOTED)
    for i, (fake, version) in enumerate(zip(fakes, noted, strict=True)):
        if fake._version != version and fake.requires_grad:
            bound, spec, _, positions = ctx.get_local("layout").as_python_constant()[:4]
            names: tuple[str, ...] = ()
            if code is not None:
                cells = tuple(types.CellType() for _ in code.co_freevars)
                names = positional_names(types.FunctionType(code, {}, None, None, cells), bound)
            path = leaf_paths(spec, names)[positions[i]]
            _FOUND.append(edited_message(ctx.get_local("described").as_python_constant(), path))
            break
    return ""


def refuse_edited(message: str) -> NoReturn:
    """Refuse a call whose f edited an argument in place (Note [edits in place under
    compile]): a graph break, then eager's error, raised outside Dynamo."""
    graph_break(message)  # under fullgraph=True, the error
    outside(_raise_edited, message)
    raise AssertionError("unreachable: `_raise_edited` raises")


def _raise_edited(message: str) -> NoReturn:
    raise CustomGradientValueError(message)
