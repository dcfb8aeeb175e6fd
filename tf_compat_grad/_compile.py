"""The node used while `torch.compile` traces a decorated function, and decorations made
while it traces.

# Note [compile]
Dynamo traces plain functions, tensors and constants through an `autograd.Function`, but not
objects of our own classes made outside the traced region, nor the closure surgery of Note
[saved closures]. Compiled autograd has no double backward either, so the reasons f runs before
the eager node with grad recording on (Note [where f runs]) do not apply. Here f runs before the
node with grad mode off, watched for Parameters as in eager mode, so the Parameters it reads
are inputs of the node and get their gradients; f, its outputs and grad_fn (a plain closure)
go through `apply` as arguments, and backward calls grad_fn with the same checks and repairs as in
eager mode. grad_fn's closure stays a closure: what it holds is the compiler's to save.

Where `ParameterReach` proves that f reads no Parameter, f runs without the watcher (Note
[compile unwatched]).

# Note [compile unwatched]
A call of a decorated plain function runs f without the watcher when, as Dynamo traces it,
the reach proof (Note [watching only when needed] in `_reach.py`) answers that f reads no
Parameter and can name no plain tensor that requires grad, and its keyword values are Python
numbers or strings (`_unwatched_question`, run as Python while tracing: a constant of the
graph). Sound where f is traced into the deciding graph: Dynamo guards every name, closure
cell, attribute and tensor (with its `requires_grad`) f's trace read, so the graph runs only
while f would read the same objects, none a Parameter; when one is rebound, the frame is traced
again and the proof asked again. Not sound where the decision is a constant of a compiled frame
and f runs in a frame of its own (after a graph break in f): nothing in the deciding frame
guards what f reads. On torch 2.13 to 2.15 that never happens: f is called inside a `try`
block, so Dynamo, meeting a graph break in f, gives up on the frames down to `call_compiled`
and runs that one as Python (its frames then compiled one by one), where the question is
decided anew on every call, the proof checking that what it read still holds. Should a later
Dynamo resume there, the decision stays sound: the question marks the decoration `pending`
until f's trace comes back (asked with None), so a trace of f that broke the graph leaves the
mark and every later decision is to watch, as is every decision while Dynamo's
`nested_graph_breaks` is on. Methods, other keyword values and decorations made while Dynamo
traces (Note [decorating while compiling]) are watched. `tests/test_compose.py` rebinds a
global, a closure cell and a module attribute to a Parameter between compiled calls, with and
without a graph break in f.

# Note [compile outputs]
f's outputs go into the node as inputs of `apply`, and its forward hands them over detached:
an input an `autograd.Function` returns as it is becomes a view of it (Dynamo adds `view_as`),
which may not be edited in place. One `detach` is the whole cost in the graph over a
hand-written Function: an output f made under `no_grad` is passed as it is (detaching it first
was a second op per output). An output that is an input, a view of one, or an earlier output
is copied (`_handed_over`), as in eager mode: Dynamo refuses a tensor passed twice to `apply`,
and before, an edit in place of `return x, grad_fn`'s output changed x.

# Note [compile guards]
Dynamo guards every global a traced frame reads, the node's backward included (it traces it
with the forward), so a compiled step pays, on every call, for each name the library's own
code reads while Dynamo traces it: each module, each function, class or builtin read from
one, each item of a container read, `type` and `id` of an argument or Parameter, `super()`,
the defaults a call leaves out; one object reached under two names costs a second guard that
compares them. So the traced path reads names, never modules (`_structure.leaves`, not
`_structure` then `leaves`); what depends on classes and constants alone is computed by a
function that Dynamo runs as Python while tracing, its result a constant of the frame behind
one guard (`run_while_tracing`: `_traced_here`, `_plain_layout`, `_result_kind`,
`_leaf_classes`, `_tree_plan`, `_function_kind`, `_autocast_now`, the watcher's
`_is_metadata`); a tree of outputs is numbered while traced (`_numbered`), and its spec and
rebuilding are such constants (`_tree_plan`, `_placed`); the compile watcher keeps
the Parameters f reads by identity and never reads their type; grad mode is set directly, not
through `torch.no_grad`; a decorated function reaches `call_compiled` through one closure
made per decoration (`compiling_call`); one node class, `_CompileNode`, serves every
decorated function, taking f and grad_fn as arguments of `apply`; f runs without the watcher
where the reach proof allows (Note [compile unwatched]), which also spares the
`set_torch_function_mode_stack` call Dynamo emits after a frame that entered a mode; a pair
returned by f is split with its checks read from classes (`_pair_class`, `_callable_class`),
and `check_accepts` is called only where f read Parameters. What is left (log1pexp, torch
2.13: 60 guards against the Function's 22; 62 against 23 on torch 2.15) is what the design
needs: the way in, from the decorated function to `call_compiled` (11 against the Function's
class: the function, its wrapper's type, `__call__` and instance dict, `_is_compiling`, the
closure per decoration, `_traced_here`, `UNBOUND`); the call of f (6: the layout, the question
of Note [compile unwatched], grad mode, f); the split of its result (4); the hand-over of the
outputs (4); the node (3); the record `setup_context` builds (6) and its check in backward (8:
`Tensor` is read there under two more names, each a guard comparing it with `torch.Tensor`,
run in Python). A method, or f that reads Parameters, adds the watcher's (about 12).
benchmarks/README.md ("Compile guards and decorating in forward") has the counts per case and
what they cost.

# Note [decorating while compiling]
TensorFlow code often defines `@tf.custom_gradient` inside `call`, a new decoration per call,
and `port` translates it as it is. Making a `CustomGradient` makes classes, which Dynamo cannot
trace. While Dynamo traces, `custom_gradient(f)` of a plain function returns a nested function
that calls f through `_CompileNode` instead, as a decorated call does (`decorated_while_tracing`):
Dynamo traces it like any closure, in one graph and without a recompile per decoration. Kept
and called later outside Dynamo, or under a `torch.func` transform, it decorates f then and
calls that, so that such a call takes the path a decorated call would. Where
a decorated call would leave the graph (torch < 2.13, a `torch.func` transform) and for the
wrappers of `recompute_grad` and `grad_pass_through`, the decoration is a graph break, and under
`fullgraph=True` an error that names f and says to decorate it once, outside the compiled code.

# Note [compile under torch.func]
Under a `torch.func` transform inside a compiled region (`torch.compile(torch.func.grad(f))`),
Dynamo traces an `autograd.Function` but differentiates its forward instead of calling its
backward (docs/torch_facts.md, "torch.compile and torch.func"). The compile node's forward only
hands f's outputs over, so that gave 0.0. There a decorated call runs outside Dynamo, as under
the transform in eager mode: a graph break, and under `fullgraph=True` an error that names f.
Dynamo then compiles the frames that run eagerly under the transform one by one, and it failed
on the transform's wrapped tensors in the node's backward; so the methods of the `torch.func`
node are never compiled (`never_compiled`).
"""

from __future__ import annotations

import os
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from . import _autocast, _run, _structure
from ._captures import CapturedRule, lost_under_compile_reason, settle
from ._compile_exits import outside, parameters_of, refuse_upstreams, upstreams_refusal
from ._export import exported
from ._record import Record, input_meta
from ._run import UNBOUND, Layout, aliases, as_output, call_f, split
from ._structure import flatten, leaves, unflatten
from ._torch_internals import (
    DYNAMO_TRACES_WATCHER,
    functorch_transforms_active,
    graph_break,
    is_dynamo_compiling,
    is_exporting,
    nested_graph_breaks,
    never_compiled,
    run_while_tracing,
    set_grad_mode,
    transforms_active_while_tracing,
)
from ._variables import check_accepts
from ._watcher import CompiledWatcher

if TYPE_CHECKING:
    from ._reach import ParameterReach

_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling

# The call's `Layout` and variables as plain constants, the only kind of non-tensor argument
# Dynamo passes through `apply` on every supported torch (Note [compile]): (bound, spec,
# number of flattened arguments, tensor positions, variables).
_Constants = tuple[bool, _structure.Spec, int, Sequence[int], list[torch.nn.Parameter]]


def call_compiled(
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    described: str,
    captured: CapturedRule = "refuse",
    unwatched: Unwatched | None = None,
) -> Any:
    """Call f through the compile node (Note [compile]). `described`: f by name, file and
    line, made before Dynamo traces (which misreads f's attributes); `captured`: the rule of
    `custom_gradient(captured=...)`; `unwatched`: f's reach proof, where f may run without the
    watcher (Note [compile unwatched]). Written for few guards (Note [compile guards])."""
    layout = _plain_layout(bound is not UNBOUND, [arg.__class__ for arg in args])
    if layout is not None and not any(args[i].is_nested for i in layout[3]):
        flat_args: Sequence[Any] = args
        inputs: Sequence[torch.Tensor] = [args[i] for i in layout[3]]
    else:
        flat_args, full, inputs = _run.inputs(f, bound, args)
        layout = (full.bound, full.spec, full.n_args, full.positions)
    watcher = None
    if unwatched is None or not unwatched([v.__class__ for v in kwargs.values()]):
        keywords: Any = ()
        if kwargs:  # the watcher looks for the Parameters among them, in any order
            values = [*kwargs.values()]
            keywords = values if _leaf_classes([v.__class__ for v in values]) else leaves(kwargs)
        watcher = CompiledWatcher(flat_args, keywords)
    prior = _grad_enabled()
    set_grad_mode(False)
    try:
        if watcher is None:
            out = f(*args, **kwargs)
        else:
            with watcher:
                out = f(*args, **kwargs) if bound is UNBOUND else call_f(f, bound, args, kwargs)
    finally:
        set_grad_mode(prior)
    # `watched_result` without its settling (the compile watcher settles nothing).
    # `split`, its checks read from classes where f returned a pair (Note [compile guards]).
    if _pair_class(out.__class__) and len(out) == 2:
        result, grad_fn = out
        if not _callable_class(type(grad_fn)):
            split(f, out)  # raises
    else:
        split(f, out)  # raises
    if watcher is None:
        unwatched(None)  # type: ignore[misc]  # not None: f ran unwatched
        variables: list[torch.nn.Parameter] = []
    else:
        variables = watcher.unpassed()
        check_accepts(f, bound, grad_fn, variables)  # at call time, as TensorFlow (item 33)
    # How the outputs are rebuilt: "one" tensor, a "tuple" of tensors, else by their spec.
    how, exporting = _result_kind(result.__class__)
    rebuild: Any = how
    sources = [*inputs, *variables]
    if rebuild == "one":
        outputs = _handed_over((result,), sources)
    elif rebuild == "tuple" and _all_tensor_classes([o.__class__ for o in result]):
        outputs = _handed_over(result, sources)
    else:  # a tree: its spec and its rebuilding are trace-time constants where it can be
        found: list[Any] = []
        odd: list[Any] = []  # containers other than plain lists, tuples and dicts
        numbered = _numbered(result, found, odd)
        if odd:
            flat, spec = flatten(result)
            rebuild = (spec, None)
        else:
            order, spec, template = _tree_plan(numbered)
            flat, rebuild = [found[i] for i in order], (spec, template)
        outputs = _handed_over([as_output(f, o, i, spec) for i, o in enumerate(flat)], sources)
    if exporting:  # Note [export] in `_export.py`
        outputs = exported(described, outputs, sources)
    else:
        # Note [lost gradients under compile] in `_captures.py`
        if watcher is not None and watcher.reaches(result):
            graph_break(lost_under_compile_reason(described))  # under fullgraph=True, the error
            variables = outside(
                settle, f, bound, kwargs, watcher.seeds, inputs, variables, (), captured
            )
            check_accepts(f, bound, grad_fn, variables)
        if variables or any(t.requires_grad for t in inputs):
            if len(outputs) > 1:  # Note [upstreams under compile] in `_compile_exits.py`
                readable = parameters_of(grad_fn)
                refusal = readable and upstreams_refusal(
                    *readable, len(outputs), bool(variables), described
                )
                if refusal:
                    graph_break(refusal)  # under fullgraph=True, the error
                    outside(refuse_upstreams, f, grad_fn, len(outputs), variables, refusal)
            outputs = _CompileNode.apply(  # type: ignore[no-untyped-call]
                (*layout, variables), f, grad_fn, len(outputs), *outputs, *inputs, *variables
            )
    # The outputs rebuilt here, not by a function: Dynamo guards each (Note [compile guards]).
    if rebuild == "one":
        return outputs[0]
    if rebuild == "tuple":
        return tuple(outputs)
    spec, template = rebuild
    return unflatten(spec, outputs) if template is None else _placed(template, outputs)


def _handed_over(
    outputs: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]
) -> list[torch.Tensor]:
    """f's flattened outputs as the compile node takes them (Note [compile outputs]): as they
    are where f made them (under `no_grad`), detached where they require grad, and copied where
    they alias one of `sources` (the call's inputs and variables) or an earlier output."""
    handed: list[torch.Tensor] = []
    earlier: list[torch.Tensor] = []
    for o in outputs:
        base = o._base
        if aliases(o, sources) or any(o is e or base is e or e._base is o for e in earlier):
            handed.append(o.detach().clone())  # as eager copies them (Note [outputs that
            # alias an input] in `_run.py`)
        else:
            handed.append(o.detach() if o.requires_grad else o)
        earlier.append(o)
    return handed


def _numbered(tree: Any, leaves: list[Any], odd: list[Any]) -> Any:
    """tree with each leaf replaced by its index in `leaves`, where it is appended; a container
    other than a plain list, tuple or dict is appended to `odd` (Dynamo traces it, reading no
    global but itself: Note [compile guards])."""
    kind = type(tree)
    if kind is tuple:
        return tuple([_numbered(x, leaves, odd) for x in tree])
    if kind is list:
        return [_numbered(x, leaves, odd) for x in tree]
    if kind is dict:
        return {k: _numbered(v, leaves, odd) for k, v in tree.items()}
    if isinstance(tree, (list, tuple, dict)):
        odd.append(tree)
    leaves.append(tree)
    return len(leaves) - 1


@run_while_tracing
def _tree_plan(numbered: Any) -> tuple[tuple[int, ...], Any, Any]:
    """For a tree numbered by `_numbered`: the order of its leaves in `flatten`'s order, its
    spec, and how `_placed` rebuilds it from the flattened leaves (what `unflatten` builds)."""
    order, spec = flatten(numbered)
    return tuple(order), spec, _template(unflatten(spec, range(len(order))))


def _template(tree: Any) -> Any:
    """A tree of plain containers of numbers as tagged tuples, which Dynamo reads without
    guards (the type of a trace-time constant has none)."""
    if isinstance(tree, dict):
        return ("dict", tuple((k, _template(v)) for k, v in tree.items()))
    if isinstance(tree, (list, tuple)):
        return ("list" if isinstance(tree, list) else "tuple", tuple(map(_template, tree)))
    return ("leaf", tree)


def _placed(template: Any, values: Sequence[Any]) -> Any:
    """The tree `_template` describes, each leaf number replaced by that item of values."""
    tag, content = template
    if tag == "leaf":
        return values[content]
    if tag == "dict":
        return {k: _placed(t, values) for k, t in content}
    items = [_placed(t, values) for t in content]
    return items if tag == "list" else tuple(items)


def compiling_call(
    f: Callable[..., Any],
    described: str,
    captured: CapturedRule,
    leave: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any],
    reach: ParameterReach,
) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    """What a call of a decorated plain function does while Dynamo traces (or `torch.export`
    exports) its caller: `call_compiled` where Dynamo traces the call, else `leave` (the
    wrapper's route out of the graph, Notes [compile on older torch] and [compile under
    torch.func]). A closure per decoration and rule, so that Dynamo guards one object on the way
    in (Note [compile guards]); `reach`: f's reach proof (Note [compile unwatched])."""
    if not DYNAMO_TRACES_WATCHER:
        return lambda args, kwargs: leave(UNBOUND, args, kwargs)
    unwatched = _unwatched_question(reach)

    def compiling(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if _traced_here():
            return call_compiled(f, UNBOUND, args, kwargs, described, captured, unwatched)
        return leave(UNBOUND, args, kwargs)

    return compiling


# "May this traced call run f unwatched" (Note [compile unwatched]), asked with the classes of
# the keyword values; asked with None: f's trace came back. A closure per decoration, run while
# tracing behind one guard (an object of ours would cost its type and identity too).
Unwatched = Callable[[Sequence[type] | None], bool]


def _unwatched_question(reach: ParameterReach) -> Unwatched:
    pending = False  # from a decision to run f unwatched until f's trace comes back

    def unwatched(keyword_classes: Sequence[type] | None) -> bool:
        nonlocal pending
        if keyword_classes is None:  # f's trace came back: it is in the deciding graph
            pending = False
            return True
        # Still pending: the last trace of f without the watcher broke the graph (or failed).
        if pending or nested_graph_breaks():
            return False
        if any(kind not in _NUMBERS for kind in keyword_classes) or reach.possible(()):
            return False
        pending = reach.calm()  # until f's trace comes back
        return pending

    return run_while_tracing(unwatched)


# Where the question runs in a frame Dynamo compiled only in part, it and the proof's frames
# are never compiled (every question shares this code).
never_compiled(_unwatched_question(None))  # type: ignore[arg-type]


@run_while_tracing
def _traced_here() -> bool:
    """Whether Dynamo traces a decorated call where it is called: on this torch, and outside
    a `torch.func` transform (Notes [compile on older torch], [compile under torch.func])."""
    return DYNAMO_TRACES_WATCHER and not functorch_transforms_active()


# Trace-time constants of the compile path, read from classes (Note [compile guards]).


@run_while_tracing
def _result_kind(kind: type) -> tuple[str, bool]:
    """How f's outputs of this type are rebuilt ("one" tensor, a "tuple", or "tree": by their
    spec), and whether `torch.export` traces the call (Note [export] in `_export.py`)."""
    how = "one" if kind is torch.Tensor else "tuple" if kind is tuple else "tree"
    return how, is_exporting()


@run_while_tracing
def _autocast_now() -> Any:
    return _autocast.current()


@run_while_tracing
def _leaf_classes(kinds: list[type]) -> bool:
    """Whether values of these classes are leaves of a structure (`_structure.py`)."""
    return not any(issubclass(kind, _structure._CONTAINERS) for kind in kinds)


@run_while_tracing
def _pair_class(kind: type) -> bool:
    """Whether `split` unpacks a value of this class when it has two items."""
    return issubclass(kind, (tuple, list))


@run_while_tracing
def _callable_class(kind: type) -> bool:
    """Whether values of this class are callable (what `callable` reads: the class's
    `__call__`)."""
    return any("__call__" in vars(base) for base in kind.__mro__)


@run_while_tracing
def _all_tensor_classes(kinds: list[type]) -> bool:
    return all(kind is torch.Tensor for kind in kinds)


_NUMBERS = (bool, int, float, complex, str)


@run_while_tracing
def _plain_layout(bound: bool, kinds: list[type]) -> tuple[Any, ...] | None:
    """The `Layout` constants of a call whose positional arguments are of these types, when
    each is a tensor or a Python number or string (which `_run.inputs` accepts as they are);
    None otherwise."""
    positions = tuple(i for i, kind in enumerate(kinds) if issubclass(kind, torch.Tensor))
    if len(positions) + sum(kind in _NUMBERS for kind in kinds) != len(kinds):
        return None
    return bound, _structure.tuple_spec(len(kinds)), len(kinds), positions


def decorated_while_tracing(
    f: Any, decorate: Callable[[Any], Callable[..., Any]], captured: CapturedRule = "refuse"
) -> Callable[..., Any] | None:
    """What `custom_gradient(f)` returns while Dynamo traces the code that decorates f (Note
    [decorating while compiling]): a function that calls f through the compile node, or None
    where the decoration must leave the graph. Called outside Dynamo, or under a `torch.func`
    transform, the function decorates f with `decorate` (`custom_gradient` with the decoration's
    options, `captured` among them) and calls that."""
    if (
        not DYNAMO_TRACES_WATCHER
        or transforms_active_while_tracing()
        or type(f) is not types.FunctionType
        or getattr(f, "__wrapped__", None) is not None
    ):
        return None
    described = _described_code(f.__code__)

    def decorated(*args: Any, **kwargs: Any) -> Any:
        if _is_compiling() and not transforms_active_while_tracing():
            return call_compiled(f, UNBOUND, args, kwargs, described, captured)
        return decorate(f)(*args, **kwargs)

    return decorated


@run_while_tracing
def _described_code(code: types.CodeType) -> str:
    """A function by its code, as `describe` names it (Dynamo misreads a nested function's
    attributes, and a code object is a constant of the traced frame)."""
    name = getattr(code, "co_qualname", code.co_name)  # Python 3.10: the name alone
    return f"`{name}` ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


class _CompileNode(torch.autograd.Function):
    """The node of every decorated call while Dynamo traces (Note [compile]): f and grad_fn
    are arguments of `apply`, so one class serves every decorated function, and a decoration
    made while Dynamo traces needs no class of its own (Note [decorating while compiling])."""

    @staticmethod
    def forward(
        constants: _Constants,
        f: Callable[..., Any],
        grad_fn: Callable[..., Any],
        n_outputs: int,
        *tensors: torch.Tensor,
    ) -> tuple[torch.Tensor, ...]:
        return tuple(t.detach() for t in tensors[:n_outputs])

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        constants, f, grad_fn, n_outputs, *tensors = inputs
        bound, spec, n_args, positions, variables = constants
        ctx.grad_fn = grad_fn
        ctx.n_outputs = n_outputs
        # `Record.of_call`, written out: Dynamo guards each name it reads (Note [compile
        # guards]), and the autocast state is a constant of the traced call.
        given = tensors[n_outputs:][: len(positions)]
        metas = [input_meta(t) for t in (*given, *variables)]
        layout = Layout(f, bound, spec, n_args, positions)
        ctx.record = Record(layout, metas, variables, _autocast_now())

    @staticmethod
    def backward(ctx: Any, *upstream: Any) -> tuple[torch.Tensor | None, ...]:
        needs = ctx.needs_input_grad[4 + ctx.n_outputs :]
        try:
            grads = ctx.record.gradients(ctx.grad_fn, upstream, needs)
        except Exception as error:
            if is_dynamo_compiling():
                # Dynamo, tracing backward, met the refusal: a graph break, so that backward
                # runs as Python and raises it (under fullgraph=True, the error shows it).
                graph_break(str(error))
            raise
        return (*(None,) * (4 + ctx.n_outputs), *grads)
