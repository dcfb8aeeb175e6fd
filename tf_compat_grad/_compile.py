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
numbers or strings (the route question, `question` in `compiling_call`, run as Python while
tracing: a constant of the graph). Sound where f is traced into the deciding graph: Dynamo guards every name, closure
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
one guard (`run_while_tracing`: the route question, `plain_layout`, `returned_checks`,
`_leaf_classes`, `_tree_number`, `_function_kind`, `_autocast_now`, the watcher's
`op_noted`); a tree of outputs is numbered while traced (`_numbered`), and its
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
where every gradient is like its input, and builds the record only where one is not. Dynamo traces the compile closure (`compiling_call`) in place of the function
`custom_gradient` returns, guarding that function by its type and the closure by its code (the
function's inline mark: Note [the inline mark] in `_decoration.py`), where tracing the function
cost a guard for it, its own closure (`CustomGradient._caller`), and `is_compiling` and the
compile closure in that one's cells, and the wrapper object's `__call__` six (its type,
`__call__`, an instance dict without `__call__`, `_decorator` and `_is_compiling`,
`_compiling`); `compiling` holds the node class and `rebuilt` in cells (one guard each, where a
global of `_compile` cost the module's too). These are safe to lose: they guarded the way to the
compile closure; the mark's guard fails on a function without one (a name rebound to another
function, a user's wrapper, whose copied attributes never carry it), and the question, f, the
node class and the arguments are read and guarded as before. f's outputs' class is read with `__class__`
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
and fake tensors the traced code would have read). What is left (log1pexp, torch 2.13: 26
guards against the Function's 22) is the way in (4: the compile closure, the question, f, the node
class).
Routes that failed on torch 2.13: the node's helper functions as trace-time constants (in the
question's answer, or returned by a `run_while_tracing` function), which would spare a guard
each (Dynamo raised `NotImplementedError` guarding a function it had no source for), and the
class a gradient must have as such a constant (a guard that failed on the frame it was made
on), and grad_fn's class read without `type` (its `__class__`, its `__call__`, or a literal
lambda's class to compare with: Dynamo raised on each). A method, or f that reads Parameters,
takes the route of Note [compile] (`call_compiled`, f under `CompiledWatcher`, `CompileNode`),
read from the trackers the same way: the watcher's scan of each op's arguments (`_note_scan`,
answered by `op_noted` through the question, which the watcher holds: a Parameter's class read
in the trace costs a TYPE_MATCH per Parameter, `_op_noted` read from `_watcher` two guards),
`split`'s checks, whether grad_fn takes `variables=` and one output's hand-over
(`returned_noted`, `accepts_noted`, `handed_noted`, asked with "returned", "accepts" and
"handed"); `reaches` told that f's result is one plain tensor (`isinstance` reads `Tensor`); the
layout, the autocast state, grad mode and `UNBOUND` come with the question's route (its
constants: `plain_layout`, `is_grad_enabled` and `UNBOUND` read cost a guard each); the watcher
is made with `__new__` and set up by `start` (Dynamo's instantiation of a class reads `type` and
`issubclass`), and sets grad mode (`set_grad`, its class's: a builtin read costs a guard);
`call_compiled` reads the watcher's class and the node class from cells
(`_compile_watched._calling`: read as globals, the watcher's class cost a guard); the node's
backward is generated like the inside node's (`_COMPILE_BACKWARD`: the record and its helpers
only where a gradient is not like its input, `Tensor` in a cell of both backwards: read from
`_compile_node`, it cost that module's guard too), a variable's gradient taken as it is where it
is a plain tensor, as a Parameter argument's is in the inside node, told by the question which
arguments are Parameters (`__class__` of a Parameter costs a guard on torch 2.15); one output
handed back alone. A method's call, which has no question, reads and traces these. Safe to lose
for the reasons above: the trackers read are those of values the graph's guards pin, the route's
constants are decided, as the traced code would, from what the guards pin (the arguments'
classes, grad mode's own guard), the cells never change, and the generated backward takes the
record's checks wherever a gradient is not what `repair` would hand back. What is left is listed
in benchmarks/README.md ("Read from Dynamo's trackers").
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.nn import Parameter

from ._captures import CapturedRule
from ._closure import edits_upstreams
from ._compile_exits import call_older_compile
from ._compile_node import InsideNode, accepts_noted, kept_noted, returned_noted
from ._compile_outputs import handed_noted, numbered_plan, rebuilt
from ._compile_watched import call_compiled, plain_layout
from ._plan_shape import NUMBERS
from ._run import UNBOUND
from ._torch_internals import (
    DYNAMO_TRACES_WATCHER,
    dynamo_tracing,
    functorch_transforms_active,
    is_exporting,
    nested_graph_breaks,
    never_compiled,
    run_while_tracing,
    traced_items,
    transforms_active_while_tracing,
)
from ._watcher import op_noted

if TYPE_CHECKING:
    from ._decoration import Decoration
    from ._reach import ParameterReach

_is_compiling = torch.compiler.is_compiling


# The route question: which route a traced call takes, asked with the classes of its positional
# and keyword values, as `(route, constants)`: "leave" where Dynamo does not trace it (Notes
# [compile on older torch] and [compile under torch.func]); else "watched", "unwatched" where f
# may run without the watcher (Note [compile unwatched]), with `call_compiled`'s constants (the
# layout with the autocast state, None where the note did not tell that no argument is nested;
# grad mode; `UNBOUND`), or "inside" where, unwatched, f may run inside the node, with the node's
# constants (Note [f inside the compile node] in `_compile_node.py`); asked with `NOTED`
# ("noted"): with what `_note_classes` noted, which alone lets f run inside the node, or "ask"
# where nothing was noted (this frame runs as Python: ask with the classes); inside the node,
# with "returned" and "handed": what `returned_noted` and `handed_noted` noted (in
# `call_compiled` too, and "accepts": what `accepts_noted` noted); with "op" and an op, in
# the watcher: `op_noted`'s answer; with "plan" and a number: the template of a tree of
# outputs (`numbered_plan`); with "kept", in `InsideNode.forward`: what `kept_noted` noted;
# with "edits" and grad_fn's code, in the inside node's backward: whether grad_fn edits its
# upstreams in place (`edits_upstreams`); asked with None: f's trace came back. A closure per
# decoration (`question` in `compiling_call`), run while tracing behind one guard (an object of
# ours would cost its type and identity too).


def _compiling_call() -> Callable[..., Callable[..., Any]]:
    """`compiling_call`, inside the scope of the cells every compile closure shares."""
    # Cells: one guard each, where a global of this module costs the module's too; made once,
    # for every decoration (Note [one frame per decoration]).
    inside, rebuilt_outputs = InsideNode, rebuilt

    def compiling_call(
        f: Callable[..., Any],
        decoration: Decoration,
        captured: CapturedRule,
        call_eager: Callable[..., Any],
        reach: ParameterReach,
    ) -> Callable[..., Any]:
        """What a call of a decorated plain function does while Dynamo traces (or `torch.export`
        exports) its caller: `call_compiled` where Dynamo traces the call, else out of the graph to
        `call_eager` (f's eager path, Notes [compile on older torch] and [compile under
        torch.func]; it holds no wrapper: Note [decorated again] in `_eager.py`). A closure per
        decoration and rule, called as f is, which Dynamo traces in place of the decorated function
        (Note [the inline mark] in `_decoration.py`), so that it guards one object on the way in
        (Note [compile guards]); `reach`: f's reach proof (Note [compile unwatched]). Made with its
        route question in one frame (Note [one frame per decoration])."""
        if not DYNAMO_TRACES_WATCHER:
            return _leaving_older(f, decoration.outside_older_compile, call_eager)
        described, outside = decoration.described, decoration.outside_compile
        pending = False  # from a decision to run f unwatched until f's trace comes back

        # The route question (see above).
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
            if kinds == "kept":  # in `InsideNode.forward`, once the outputs are handed over
                return "kept", kept_noted() if dynamo_tracing() else None
            if kinds == "edits":  # in `InsideNode.backward` (Note [f inside the compile node])
                return "edits", edits_upstreams(keyword_classes)
            if kinds == "op":  # in `CompiledWatcher.__torch_function__`, per op
                return op_noted(kinds, keyword_classes)
            nested = True  # whether a tensor argument may be nested: known from the note only
            if kinds == NOTED:  # what `_note_classes` noted as Dynamo traced this call
                noted = _NOTED_CLASSES.pop() if _NOTED_CLASSES and dynamo_tracing() else None
                if noted is None:
                    return "ask", None
                kinds, keyword_classes, enters, nested = noted
            if (
                kinds is None or keyword_classes is None
            ):  # f's trace came back: in the deciding graph
                pending = False
                return "unwatched", None
            if functorch_transforms_active():
                return "leave", None
            # `call_compiled`'s constants: the layout with the autocast state, grad mode, `UNBOUND`
            layout = None if nested else plain_layout(False, kinds, True)
            constants = layout, torch.is_grad_enabled(), UNBOUND
            # Still pending: the last trace of f without the watcher broke the graph (or failed).
            if pending or nested_graph_breaks():
                return "watched", constants
            if any(kind not in NUMBERS for kind in keyword_classes) or reach.possible(()):
                return "watched", constants
            pending = reach.calm()  # until f's trace comes back
            if not pending:
                return "watched", constants
            if layout is None or not enters or is_exporting():
                return "unwatched", constants
            # per argument, whether it is a Parameter, whose gradient is taken as it is where it is
            # a plain tensor (its class read in the trace costs a guard on torch 2.15)
            parameters = tuple(kind is Parameter for kind in kinds)
            return "inside", (*layout[:4], described, layout[4], parameters)

        question.__dict__ = _RUN_WHILE_TRACING  # `run_while_tracing`'s mark

        def compiling(*args: Any, **kwargs: Any) -> Any:
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
                if (
                    rebuild[0] == "numbered"
                ):  # its template through the question (a global: a guard)
                    rebuild = "placed", question("plan", rebuild[1])[1]
                return rebuilt_outputs(rebuild, several[:-1])
            if route == "leave":
                return outside(call_eager, UNBOUND, args, kwargs)
            unwatched = None if route == "watched" else question  # (`UNBOUND`: a global, a guard)
            return call_compiled(f, constants[2], args, kwargs, described, captured, unwatched, question, constants)  # fmt: skip

        return compiling

    return compiling_call


compiling_call = _compiling_call()


def _leaving_older(
    f: Callable[..., Any], older: Callable[..., Any], call_eager: Callable[..., Any]
) -> Callable[..., Any]:
    """`compiling_call` on torch < 2.13: every call leaves the graph (Note [compile on older
    torch]) through `older`, the decoration's `outside_older_compile`."""
    return lambda *args, **kwargs: older(call_older_compile, f, call_eager, UNBOUND, args, kwargs)


# Note [one frame per decoration]
# A function decorated inside `forward` is decorated on every call, and each decoration makes
# its compile closure eagerly (the function's inline mark holds it, read when Dynamo first meets
# the function: Note [the inline mark] in `_decoration.py`). So `compiling_call` makes both of
# its closures in one frame, the question's `described` a cell the two share, and no closure of
# its own for the route out of the graph (the compile closure calls `outside` from a cell); the
# cells of the node class and `rebuilt` are made once, in the scope around it, for every
# decoration; the question's `run_while_tracing` mark is one attribute dict shared by every
# question (the mark set on each made a dict per decoration). What Dynamo reads is unchanged:
# the same cells of one code, the mark read with `getattr`. Only cells that hold the same value
# for every closure of that code are shared between decorations: Dynamo guards a cell it meets
# again (another decoration in the same frame) through the first closure alone, sound where
# every closure's cell holds the same value, and not for a decoration's own (`captured`).
_RUN_WHILE_TRACING = vars(run_while_tracing(lambda: None))

# Where the question runs in a frame Dynamo compiled only in part, it and the proof's frames
# are never compiled: every question shares this code, a constant of `compiling_call`'s.
_QUESTION = next(
    code
    for code in compiling_call.__code__.co_consts
    if isinstance(code, types.CodeType) and code.co_name == "question"
)
never_compiled(types.FunctionType(_QUESTION, {}, closure=tuple(map(types.CellType, _QUESTION.co_freevars))))  # fmt: skip


# The classes of a traced call's arguments and keyword values, as Dynamo holds them: noted by
# `_note_classes`, handed to `comptime` while Dynamo traces the compile closure, and taken by
# the question asked with `NOTED` next (one trace at a time: Dynamo's compile lock; a frame run
# as Python notes nothing and the question answers "ask").
NOTED = "noted"
_NOTED_CLASSES: list[tuple[list[type], list[type], bool, bool] | None] = []


def _note_classes(ctx: Any) -> None:
    held, held_keywords = traced_items(ctx, "args"), traced_items(ctx, "kwargs")
    noted = None
    if held is not None and held_keywords is not None:
        items, keywords = held[1], held_keywords[1]
        fakes = [fake for _, fake in items if fake is not None]
        nested = any(t.is_nested for t in fakes)
        enters = any(t.requires_grad for t in fakes) and not nested
        noted = [kind for kind, _ in items], [kind for kind, _ in keywords], enters, nested
    _NOTED_CLASSES[:] = [noted]


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
