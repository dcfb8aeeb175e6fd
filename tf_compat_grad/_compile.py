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
numbers or strings (the route question, `_route_question`, run as Python while tracing: a
constant of the graph). Sound where f is traced into the deciding graph: Dynamo guards every name, closure
cell, attribute and tensor (with its `requires_grad`) f's trace read, so the graph runs only
while f would read the same objects, none a Parameter; when one is rebound, the frame is traced
again and the proof asked again. Not sound where the decision is a constant of a compiled frame
and f runs in a frame of its own (after a graph break in f): nothing in the deciding frame
guards what f reads. On torch 2.13 to 2.15 that never happens: f is called inside a `try`
block (in `call_compiled`, or in the node's `apply` inside one: Note [f inside the compile
node] in `_compile_node.py`), so Dynamo, meeting a graph break in f, gives up on the frames
down to that one and runs it as Python (its frames then compiled one by one), where the question is
decided anew on every call, the proof checking that what it read still holds. Should a later
Dynamo resume there, the decision stays sound: the question marks the decoration `pending`
until f's trace comes back (asked with None), so a trace of f that broke the graph leaves the
mark and every later decision is to watch, as is every decision while Dynamo's
`nested_graph_breaks` is on. Methods, other keyword values and decorations made while Dynamo
traces (Note [decorating while compiling]) are watched. `tests/test_compose.py` rebinds a
global, a closure cell and a module attribute to a Parameter between compiled calls, with and
without a graph break in f.

# Note [compile guards]
Dynamo guards every global a traced frame reads, the node's backward included (it traces it
with the forward), so a compiled step pays, on every call, for each name the library's own
code reads while Dynamo traces it: each module, each function, class or builtin read from
one, each item of a container read, `type` and `id` of an argument or Parameter, `super()`,
the defaults a call leaves out; one object reached under two names costs a second guard that
compares them. So the traced path reads names, never modules (`_structure.leaves`, not
`_structure` then `leaves`); what depends on classes and constants alone is computed by a
function that Dynamo runs as Python while tracing, its result a constant of the frame behind
one guard (`run_while_tracing`: the route question, `_plain_layout`, `returned_checks`,
`_leaf_classes`, `_tree_number`, `_function_kind`, `_autocast_now`, the watcher's
`_op_noted`); a tree of outputs is numbered while traced (`_numbered`), and its
rebuilding is such a constant (`_tree_number`, `rebuilt`); the compile watcher keeps the
Parameters f reads by identity and never reads their type; the arguments' classes are read with
`__class__` (`type()` costs a class guard per tensor and Parameter); grad mode is set directly,
not through `torch.no_grad`; a decorated function reaches its route through one closure made per
decoration (`compiling_call`), whose question decides the route and returns the node's
constants with it; two node classes (`_compile_node.py`) serve every
decorated function, taking f (and grad_fn) as arguments of `apply`; f runs without the watcher
where the reach proof allows (Note [compile unwatched]), which also spares the
`set_torch_function_mode_stack` call Dynamo emits after a frame that entered a mode, and then
inside the node (Note [f inside the compile node]), sparing grad mode, the outputs' `detach` and
`setup_context`; a pair returned by f is split with its checks read from classes
(`returned_checks`, asked twice, whose first answer also carries the check of edits in place);
builtins are not read by name where a method or a literal's class does (`out.__len__()`,
`().__class__`: each builtin name read costs a guard on the builtins dict); where f read
Parameters, whether grad_fn takes `variables=` is read from its code while tracing
(`code_accepts_variables`: MLP closure 115 -> 109 guards), `check_accepts` called only to
refuse; one output is handed back without `rebuilt`; the inside node's backward reads no global
where every gradient is like its input, and builds the record only where one is not. The function `custom_gradient` returns calls a closure (`CustomGradient._caller`), not
the wrapper object, whose `__call__` cost six guards (its type, `__call__`, an instance dict
without `__call__`, `_decorator` and `_is_compiling`, `_compiling`), and `compiling` holds the
node class and `rebuilt` in cells (one guard each,
where a global of `_compile` cost the module's too). These are safe to lose: they guarded the
way to the compile closure, and the way is now cells, each guarded as `_compiling` was (the code
of the function in it); the question, f, the node class and the arguments are read and guarded
as before. f's outputs' class is read with `__class__`
(`type()` of a tensor cost `type`, `Tensor` reached through torch, and a guard comparing the
two names); a class Dynamo knows from the graph, so the split's decision is the same. A
Parameter argument's gradient that is a plain tensor with its metadata goes out as it is, as
`repair` would hand it (`EXACT_LIKE_INPUT`), instead of through the record's checks, whose
globals cost about 30 guards on the MLP with Parameters as arguments; the hand-over writes
out `_run.aliases` (a global function costs a guard).
What Dynamo holds of a value it has guarded already is read in `comptime` callbacks, which
Dynamo runs as Python while it traces and which cost no guard when they are literal lambdas
(made from the code's constants; what they call is read as Python, not traced): the classes,
`requires_grad` and nesting of the arguments and keyword values (`_note_classes`, through
`traced_items`: a tensor's are pinned by its tensor guard, a constant's by its value; read with
`__class__` and a traced `requires_grad`, they cost a TYPE_MATCH per tensor argument); in the
inside node, after f, `split`'s checks of f's result and grad_fn (`returned_noted`: the global
`returned_checks` and `type` of grad_fn cost a guard each) and, once it is split, whether its
outputs (one tensor, or a tuple of them) go over as f made them, which `handed_outputs` run on
Dynamo's fake tensors answers, and whether grad_fn takes one upstream per output
(`handed_noted`: `handed_outputs` and `upstreams_checked` traced cost their globals, 9 guards
for two outputs). The answers come back through the question, which `apply` carries into the
node (guarded once, on the way in): asked with "noted", "returned" and "handed". Where Dynamo
holds another kind of value, or where the frame runs as Python, nothing is noted and the same
checks are traced as before (`tests/test_compile_trackers.py`). The node hands one output back
alone (torch's `autograd.Function` code reads `tuple` to hand several back), and a tuple of
outputs is rebuilt without `rebuilt`, and a tree from its template, asked by number through
the question (`numbered_plan` and a global recursive function cost 3 guards); its backward is generated with `EXACT_LIKE_INPUT` written
out (`_INSIDE_BACKWARD`: `like_input` and the `_compile_node` module cost a guard each). These
are safe to lose: each answer is a constant of the graph decided from what the graph's guards
already pin, and decided as the traced code decided it (the same functions, on the trackers
and fake tensors the traced code would have read). What is left (log1pexp, torch 2.13: 28
guards against the Function's 22) is the way in (6: `_caller`'s closure, `is_compiling`,
`compiling`, the question, f, the node class).
Routes that failed on torch 2.13: the node's helper functions as trace-time constants (in the
question's answer, or returned by a `run_while_tracing` function), which would spare a guard
each (Dynamo raised `NotImplementedError` guarding a function it had no source for), and the
class a gradient must have as such a constant (a guard that failed on the frame it was made
on), and grad_fn's class read without `type` (its `__class__`, its `__call__`, or a literal
lambda's class to compare with: Dynamo raised on each). A method, or f that reads
Parameters, takes the route of Note [compile] (`call_compiled`, f under `CompiledWatcher`,
`CompileNode`), read from the trackers the same way (MLP with closure Parameters, torch 2.13:
106 -> 80 guards against the Function's 59): the watcher's scan of each op's arguments
(`_note_scan`, answered by `_op_noted`: a Parameter's class read in the trace cost a TYPE_MATCH
per Parameter), `reaches` told that f's result is one plain tensor (`isinstance` read `Tensor`), `split`'s checks and whether grad_fn takes `variables=` (`returned_noted` and
`accepts_noted` in `_compile_node.py`, asked with "returned" and "accepts" through the question,
which the closure hands to `call_compiled`; a method's call, which has none, traces them); the
watcher made with `__new__` and set up by `start` (Dynamo's instantiation of a class reads
`type` and `issubclass`); the autocast state computed with the layout; the node's backward
generated like the inside node's (`_COMPILE_BACKWARD`: the record and its helpers, 14 guards,
only where a gradient is not like its input); one output handed back alone. Safe to lose for the
reasons above: the trackers read are those of values the graph's guards pin, and the generated
backward takes the record's checks wherever a gradient is not what `repair` would hand back.
What is left is listed in benchmarks/README.md ("Read from Dynamo's trackers").
benchmarks/README.md ("Compile guards and decorating in forward", "f inside the compile node",
"The way in, the split and Parameters' gradients", "Builtins, one check function, one closure",
"Read from Dynamo's trackers") has the counts per case and what they cost.

# Note [decorating while compiling]
TensorFlow code often defines `@tf.custom_gradient` inside `call`, a new decoration per call,
and `port` translates it as it is. Making a `CustomGradient` makes classes, which Dynamo cannot
trace. While Dynamo traces, `custom_gradient(f)` of a plain function returns a nested function
that calls f through `CompileNode` instead, as a decorated call does (`decorated_while_tracing`):
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
from ._compile_exits import edits_checked, outside, refuse_edited, upstreams_checked
from ._compile_node import (
    CompileNode,
    InsideNode,
    accepts_noted,
    refuse_split,
    returned_checks,
    returned_noted,
)
from ._compile_outputs import handed_noted, handed_outputs, numbered_plan, rebuilt
from ._export import exported
from ._run import UNBOUND, call_f
from ._structure import leaves
from ._torch_internals import (
    DYNAMO_TRACES_WATCHER,
    dynamo_tracing,
    functorch_transforms_active,
    graph_break,
    is_exporting,
    nested_graph_breaks,
    never_compiled,
    run_while_tracing,
    set_grad_mode,
    traced_items,
    transforms_active_while_tracing,
)
from ._variables import check_accepts, code_accepts_variables
from ._watcher import CompiledWatcher

if TYPE_CHECKING:
    from ._reach import ParameterReach

_grad_enabled = torch.is_grad_enabled
_is_compiling = torch.compiler.is_compiling


def call_compiled(
    f: Callable[..., Any],
    bound: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    described: str,
    captured: CapturedRule = "refuse",
    unwatched: Question | None = None,
    question: Question | None = None,
) -> Any:
    """Call f through the compile node (Note [compile]). `described`: f by name, file and
    line, made before Dynamo traces (which misreads f's attributes); `captured`: the rule of
    `custom_gradient(captured=...)`; `unwatched`: the question that decided to run f without
    the watcher (Note [compile unwatched]), else None; `question`: the decoration's route
    question, which answers what `returned_noted` noted (else the checks are traced). Written
    for few guards (Note [compile guards])."""
    layout = _plain_layout(bound is not UNBOUND, [arg.__class__ for arg in args], True)
    if layout is not None and not any(args[i].is_nested for i in layout[3]):
        inputs: Sequence[torch.Tensor] = [args[i] for i in layout[3]]
    else:
        _, full, inputs = _run.inputs(f, bound, args)
        layout = (full.bound, full.spec, full.n_args, full.positions, _autocast_now())
    watcher = None
    if unwatched is None:
        keywords: Any = ()
        if kwargs:  # the watcher looks for the Parameters among them, in any order
            values = [*kwargs.values()]
            keywords = values if _leaf_classes([v.__class__ for v in values]) else leaves(kwargs)
        # (`CompiledWatcher(...)`: Dynamo's instantiation reads `type` and `issubclass`)
        watcher = CompiledWatcher.__new__(CompiledWatcher)
        watcher.start(inputs, keywords)
    from torch._dynamo.comptime import comptime  # a local import: no guard

    # Note [edits in place under compile] in `_compile_exits.py`; `versions` where this frame
    # runs as Python (a graph break in f, inside this `try`); literal lambdas: no guard
    versions: list[int] = []
    comptime(lambda c: edits_checked(c), lambda: versions.extend([t._version for t in inputs]))
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
    if question is None:  # (a method's call: the edit check's answer, for the traced checks)
        comptime(returned_checks)
        noted, checks = "ask", None
    else:
        comptime(lambda c: returned_noted(c))
        noted, checks = question("returned", None)
    if noted == "returned":  # read from Dynamo's trackers
        edited, kind = checks  # type: ignore[misc]
    else:  # `split`, its checks read from classes where f returned a pair
        edited, pair = returned_checks(out.__class__, None)
        pair = pair and out.__len__() == 2  # `split`'s checks
        kind = returned_checks(out[0].__class__, type(out[1])) if pair else None
    if edited:
        refuse_edited(edited)
    if versions:
        _run.check_unedited(f, _run.Layout(f, *layout[:4]), inputs, versions)
    # `watched_result` without its settling (the compile watcher settles nothing).
    if not kind:
        refuse_split(f, out, described)
    result, grad_fn = out
    if watcher is None:
        unwatched(None, None)  # type: ignore[misc]  # not None: f ran unwatched
        variables: list[torch.nn.Parameter] = []
    else:
        variables = watcher.unpassed()
        # At call time, as TensorFlow (item 33); read from grad_fn's code while tracing, from
        # Dynamo's tracker where the question answers (`accepts_noted`).
        if variables:
            comptime(lambda c: accepts_noted(c))
            accepts = question is not None and question("accepts", None)[1]
            if not accepts and not code_accepts_variables(
                type(grad_fn), getattr(grad_fn, "__code__", None)
            ):
                check_accepts(f, bound, grad_fn, variables)
    sources = [*inputs, *variables]
    outputs, rebuild, exporting = handed_outputs(f, result, sources, kind)
    if exporting:  # Note [export] in `_export.py`
        outputs = exported(described, outputs, sources)
    else:
        # Note [lost gradients under compile] in `_captures.py`
        if watcher is not None and watcher.reaches(result, rebuild == "one"):
            graph_break(lost_under_compile_reason(described))  # under fullgraph=True, the error
            variables = outside(
                settle, f, bound, kwargs, watcher.seeds, inputs, variables, (), captured
            )
            check_accepts(f, bound, grad_fn, variables)
        if variables or any(t.requires_grad for t in inputs):
            n_outputs = outputs.__len__()  # (the builtin `len` costs a guard)
            if n_outputs > 1:  # Note [upstreams under compile] in `_compile_exits.py`
                upstreams_checked(f, grad_fn, n_outputs, variables, described)
            handed = CompileNode.apply(  # type: ignore[no-untyped-call]
                (*layout, variables), f, grad_fn, n_outputs, *outputs, *inputs, *variables
            )
            outputs = [handed] if n_outputs == 1 else handed  # one alone (`CompileNode.forward`)
    return outputs[0] if rebuild == "one" else rebuilt(rebuild, outputs)  # (a global: a guard)


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
    question = _route_question(reach, described)
    # Cells: one guard each, where a global of this module costs the module's too
    inside, rebuilt_outputs = InsideNode, rebuilt

    def compiling(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        from torch._dynamo.comptime import comptime  # a local import: no guard

        comptime(lambda ctx: _note_classes(ctx))  # a literal lambda: no guard
        route, constants = question("noted", None)  # (a literal: `NOTED` read costs a guard)
        if route == "ask":  # this frame runs as Python (or Dynamo holds an unread kind)
            kinds = [a.__class__ for a in args]
            route, constants = question(kinds, [type(v) for v in kwargs.values()])
        if route == "inside":  # Note [f inside the compile node] in `_compile_node.py`
            try:  # so that Dynamo runs this frame as Python where `forward` breaks
                outputs: Any = inside.apply(constants, f, kwargs, question, *args)  # type: ignore[no-untyped-call]
            finally:
                question(None, None)  # f's trace came back
            if outputs.__class__ is not ().__class__:
                return outputs  # one tensor
            several: tuple[Any, ...] = outputs  # several outputs, their rebuilding last
            rebuild = several[-1]
            if rebuild == "tuple":  # (`rebuilt`, a cell, costs a guard)
                return several[:-1]
            if rebuild[0] == "numbered":  # its template through the question (a global: a guard)
                rebuild = "placed", question("plan", rebuild[1])[1]
            return rebuilt_outputs(rebuild, several[:-1])
        if route == "leave":
            return leave(UNBOUND, args, kwargs)
        unwatched = None if route == "watched" else question
        return call_compiled(f, UNBOUND, args, kwargs, described, captured, unwatched, question)

    return compiling


# Which route a traced call takes, asked with the classes of its positional and keyword values,
# as `(route, layout)`: "leave" where Dynamo does not trace it (Notes [compile on older torch]
# and [compile under torch.func]); else "watched", "unwatched" where f may run without the
# watcher (Note [compile unwatched]), or "inside" where, unwatched, f may run inside the node,
# `layout` then the node's constants (Note [f inside the compile node] in `_compile_node.py`);
# asked with `NOTED` ("noted"): with what `_note_classes` noted, which alone lets f run inside
# the node, or "ask" where nothing was noted (this frame runs as Python: ask with the classes);
# inside the node, with "returned" and "handed": what `returned_noted` and `handed_noted` noted
# (with "returned" in `call_compiled` too, and "accepts": what `accepts_noted` noted);
# with "plan" and a number: the template of a tree of outputs (`numbered_plan`);
# asked with None: f's trace came back. A closure per decoration, run while tracing behind one
# guard (an object of ours would cost its type and identity too).
Question = Callable[[Sequence[type] | str | None, Sequence[type] | None], tuple[str, Any]]


def _route_question(reach: ParameterReach, described: str) -> Question:
    pending = False  # from a decision to run f unwatched until f's trace comes back

    def question(kinds: Any, keyword_classes: Any) -> tuple[str, Any]:
        nonlocal pending
        enters = False  # whether f may run inside the node: known from the note only
        if kinds == "returned":  # in `InsideNode.forward`, after f (`returned_noted`)
            checks = returned_noted() if dynamo_tracing() else None
            return ("ask", None) if checks is None else ("returned", checks)
        if kinds == "plan":  # the template of a tree of outputs, by its number
            return "plan", numbered_plan(keyword_classes)
        if kinds == "accepts":  # in `call_compiled`, once f's result is split
            return "accepts", accepts_noted() if dynamo_tracing() else None
        if kinds == "handed":  # in `InsideNode.forward`, once f's result is split
            return "handed", handed_noted() if dynamo_tracing() else None
        if kinds == NOTED:  # what `_note_classes` noted as Dynamo traced this call
            noted = _NOTED_CLASSES.pop() if _NOTED_CLASSES and dynamo_tracing() else None
            if noted is None:
                return "ask", None
            kinds, keyword_classes, enters = noted
        if kinds is None or keyword_classes is None:  # f's trace came back: in the deciding graph
            pending = False
            return "unwatched", None
        if functorch_transforms_active():
            return "leave", None
        # Still pending: the last trace of f without the watcher broke the graph (or failed).
        if pending or nested_graph_breaks():
            return "watched", None
        if any(kind not in _NUMBERS for kind in keyword_classes) or reach.possible(()):
            return "watched", None
        pending = reach.calm()  # until f's trace comes back
        if not pending:
            return "watched", None
        layout = _plain_layout(False, kinds)
        if layout is None or not enters or is_exporting():
            return "unwatched", None
        return "inside", (*layout, described, _autocast.current())

    return run_while_tracing(question)


# The classes of a traced call's arguments and keyword values, as Dynamo holds them: noted by
# `_note_classes`, handed to `comptime` while Dynamo traces the compile closure, and taken by
# the question asked with `NOTED` next (one trace at a time: Dynamo's compile lock; a frame run
# as Python notes nothing and the question answers "ask").
NOTED = "noted"
_NOTED_CLASSES: list[tuple[list[type], list[type], bool] | None] = []


def _note_classes(ctx: Any) -> None:
    held, held_keywords = traced_items(ctx, "args"), traced_items(ctx, "kwargs")
    noted = None
    if held is not None and held_keywords is not None:
        items, keywords = held[1], held_keywords[1]
        fakes = [fake for _, fake in items if fake is not None]
        enters = any(t.requires_grad for t in fakes) and not any(t.is_nested for t in fakes)
        noted = [kind for kind, _ in items], [kind for kind, _ in keywords], enters
    _NOTED_CLASSES[:] = [noted]


# Where the question runs in a frame Dynamo compiled only in part, it and the proof's frames
# are never compiled (every question shares this code).
never_compiled(_route_question(None, ""))  # type: ignore[arg-type]


# Trace-time constants of the compile path, read from classes (Note [compile guards]).


@run_while_tracing
def _leaf_classes(kinds: list[type]) -> bool:
    """Whether values of these classes are leaves of a structure (`_structure.py`)."""
    return not any(issubclass(kind, _structure._CONTAINERS) for kind in kinds)


_NUMBERS = (bool, int, float, complex, str)


@run_while_tracing
def _plain_layout(
    bound: bool, kinds: Sequence[type], autocast: bool = False
) -> tuple[Any, ...] | None:
    """The `Layout` constants of a call whose positional arguments are of these types, when
    each is a tensor or a Python number or string (which `_run.inputs` accepts as they are),
    with `autocast`: then the autocast state (`CompileNode`'s constants); None otherwise."""
    positions = tuple(i for i, kind in enumerate(kinds) if issubclass(kind, torch.Tensor))
    if len(positions) + sum(kind in _NUMBERS for kind in kinds) != len(kinds):
        return None
    layout = bound, _structure.tuple_spec(len(kinds)), len(kinds), positions
    return (*layout, _autocast.current()) if autocast else layout


@run_while_tracing
def _autocast_now() -> Any:
    return _autocast.current()


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
