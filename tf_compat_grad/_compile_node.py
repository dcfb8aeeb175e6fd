"""The nodes of a compiled decorated call (Note [compile] in `_compile.py`); how f's outputs go
into them and come out is `_compile_outputs.py`.

# Note [f inside the compile node]
Where a call runs f without the watcher (Note [compile unwatched] in `_compile.py`), its
positional arguments are tensors and Python numbers or strings, and one of its tensors requires
grad, f runs inside the node's `forward` (`InsideNode`), as a hand-written `autograd.Function`
runs its own code: the graphs AOT autograd makes of the call are the Function's (no `detach` per
output), and none of the work around f that Dynamo would guard is traced outside the node.
`forward` splits f's result, checks that grad_fn can take the upstreams, hands the outputs over
flattened (Note [compile outputs] in `_compile_outputs.py`), notes each tensor argument's class, shape, dtype and device
for backward, and returns, after the outputs, how they are rebuilt: a constant, which Dynamo hands
back from `apply` as it is (it gets no gradient), so that the caller rebuilds f's tree of
outputs, known only inside the traced `forward`. Dynamo cannot read a class in a constant that
a function run while tracing made (`dict` in a spec, `int` of a number), so a plain tree's plan
is a class-free template kept by number (`_plan_number`), and a tree with a namedtuple or a
dict subclass hands back its spec as `flatten` traced it. One output comes back alone, with no
rebuilding after it. `split`'s checks, whether the outputs go over as f made them and whether
grad_fn takes their upstreams are read from what Dynamo holds, in `comptime` callbacks
(`returned_noted`, `handed_noted`: Note [compile guards] in `_compile.py`), and traced only
where that cannot be read; traced, grad_fn's class is read with `type()`: `__class__` of a
closure over a keyword value failed inside the traced `forward` (torch 2.13).

`backward` (generated: `_INSIDE_BACKWARD`) reads no global on its usual way, since Dynamo
guards each (Note [compile guards]). A grad_fn that edits its upstreams in place gets copies,
as in eager mode (Note [upstreams edited in place] in `_closure.py`): its code, read in the
traced backward, is a constant, and whether it edits is asked through the route question that
`forward` keeps on `ctx` (guarded already: `edits_upstreams` in a cell of the backward cost a
guard of its own; in `CompileNode`'s backward, whose cells Dynamo does not guard, it is read
from one). Then,
where grad_fn returned, for each argument, a gradient of the tensor argument's own class or a
plain tensor (a Parameter's gradient), with its shape, dtype and device (`EXACT_LIKE_INPUT` in
`_record.py`: what `repair` would hand back as it is) or None for a number or string, the gradients go out as they are, decided while Dynamo traces
from the fake tensors' metadata. Anything else (a number, a list, a cast, a broadcast, a wrong
count, the autocast state to call grad_fn in) builds the call's `Record` there and then and
takes its checks (`Record.checked`, `Record.gradients`), which repair or refuse as eager does.

A refusal found in `forward` is a graph break (`refuse_split`, `_compile_exits.upstreams_checked`,
`refuse_edited`: Note [edits in place under compile] in `_compile_exits.py`), since
Dynamo cannot raise it from the traced `forward` with eager's message: `compiling_call`'s
closure calls `apply` inside a `try` block, so that Dynamo, meeting the break, gives up on that
frame and runs it as Python, where the question (not tracing) never answers "inside" and the
call takes the route of Note [compile] (f before the node), whose checks raise eager's error
(`split`'s outside Dynamo, which misread f's name). Under `fullgraph=True` the break is the
error, naming f. So does a graph break in f itself: f then runs in a frame of its own, before
the node, and since the trace of f never came back the question stays pending and the call is
watched from then on.

# Note [tensors grad_fn keeps, under compile]
Eager mode saves the tensors grad_fn closes over with `ctx.save_for_backward` (Note [saved
closures] in `_closure.py`), so that an in-place edit of one before backward (f's output, an
argument) is torch's version error. A compile node keeps grad_fn on `ctx`, its cells Dynamo's:
AOT autograd saves what the traced backward reads, without the version check a tensor given to
`save_for_backward` gets (a hand-written Function that keeps a tensor on `ctx` has the same
gap), and the gradient came from the edited values. So both nodes note, in a `comptime`
callback (`kept_noted`, reading grad_fn's cells as Dynamo holds them: `traced_cells`), which
of the node's outputs and tensor arguments grad_fn's cells hold (in tuples, lists and dicts
too), and save those: an edit of one is torch's version error, as in plain autograd, and an
output grad_fn does not keep is not saved (its edit is recorded after the node). No guard: the
inside node asks through its route question, `CompileNode.setup_context` holds the taker in a
cell, which Dynamo does not guard there. Where the cells cannot be read (Dynamo's internals
changed), every output and argument is saved: an edit is then refused, never used. Not seen,
as in eager mode: a grad_fn that is not a function (a `functools.partial`, a bound method, an
object with `__call__`), or made in a frame of its own (a graph break in f: Dynamo holds it as
made outside the traced code); unlike eager mode, a tensor in an object f made (strict xfail).
Dynamo's `eager` backend checks the version of nothing a node saves (nor a Function's). AOT's
partitioner may compute a kept tensor again in backward instead of saving it (`aot_eager`, f
reading a Parameter): the gradient is then grad_fn's rule applied to what f returned, unrefused.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from . import _autocast, _structure
from ._closure import code_of, edits_upstreams, unshared
from ._compile_exits import edits_checked, outside, refuse_edited, upstreams_checked
from ._compile_outputs import handed_noted, handed_outputs
from ._errors import PREFIX
from ._record import EXACT_LIKE_INPUT, Record, check_upstreams  # noqa: F401 (read by the generated backwards)
from ._run import Layout, split  # noqa: F401 (`Layout`: read by the generated backwards)
from ._torch_internals import (
    Noted,
    dynamo_tracing,
    graph_break,
    is_dynamo_compiling,
    is_exporting,
    run_while_tracing,
    traced_cells,
    traced_function,
    traced_items,
)
from ._variables import code_accepts_variables

# The call's `Layout`, autocast state and variables as plain constants, the only kind of
# non-tensor argument Dynamo passes through `apply` on every supported torch (Note [compile]):
# (bound, spec, number of flattened arguments, tensor positions, autocast state, variables).
_Constants = tuple[
    bool, _structure.Spec, int, Sequence[int], _autocast.State, list[torch.nn.Parameter]
]


# Trace-time constants of the compile path, read from classes (Note [compile guards]).


@run_while_tracing
def callable_class(kind: type) -> bool:
    """Whether values of this class are callable (what `callable` reads: the class's
    `__call__`)."""
    return any("__call__" in vars(base) for base in kind.__mro__)


@run_while_tracing
def returned_checks(kind: Any, grad_fn_class: type | None = None) -> Any:
    """The checks of what f returned, read while Dynamo traces by one function (one guard: Note
    [compile guards] in `_compile.py`). Given to `comptime` before and after f, with Dynamo's
    context: `edits_checked` (Note [edits in place under compile] in `_compile_exits.py`).
    Asked with f's result's class and None: the message of an edit found ("" if none) and
    whether `split` unpacks a value of that class when it has two items. Asked with the classes
    of the pair's items: `split_kind`."""
    if not isinstance(kind, type):  # Dynamo's context, from `comptime`
        return edits_checked(kind)
    if grad_fn_class is None:
        return edits_checked(), issubclass(kind, (tuple, list))
    return split_kind(kind, grad_fn_class)


_RETURNED = Noted()  # what `returned_noted` noted for the question


def returned_noted(ctx: Any = None) -> Any:
    """Given to `comptime` after f in `InsideNode.forward`: compares the versions of f's inputs
    (`edits_checked`) and notes `split`'s checks of the local `out`, read from Dynamo's trackers
    (no guard: `type()` of grad_fn costs one). Asked without a context (by the question,
    `question` in `_compile.compiling_call`): the message of an edit found ("" if none) and
    `split_kind`'s answer (None where `split` refuses `out`), or None where nothing was noted."""
    if ctx is None:
        return _RETURNED.take()
    edits_checked(ctx)
    _RETURNED.clear()
    held = traced_items(ctx, "out")
    if held is not None and issubclass(held[0], (tuple, list)):
        items = held[1]
        kind = split_kind(items[0][0], items[1][0]) if len(items) == 2 else None
        _RETURNED.note((edits_checked(), kind))
    return None


_ACCEPTS = Noted()  # what `accepts_noted` noted for the question


def accepts_noted(ctx: Any = None) -> bool | None:
    """Given to `comptime` in `call_compiled` once f's result is split: notes whether the local
    `grad_fn` takes `variables=`, read from its code as Dynamo holds it (`type()` and `getattr`
    of grad_fn traced, and `code_accepts_variables`, cost a guard each). Asked without a context
    (by the question): True where it does, else None (its code does not tell, Dynamo holds
    another kind of callable, or nothing was noted: the check is traced)."""
    if ctx is None:
        return _ACCEPTS.take()  # type: ignore[no-any-return]
    _ACCEPTS.clear()
    held = traced_function(ctx, "grad_fn")
    code = held[0] if held.__class__ is tuple else getattr(held, "__code__", None)
    if code_accepts_variables(types.FunctionType, code):
        _ACCEPTS.note(True)
    return None


_KEPT = Noted()  # what `kept_noted` noted for the question


def kept_noted(ctx: Any = None, sources: str = "inputs") -> tuple[int, ...] | None:
    """Given to `comptime` in `InsideNode.forward` and `CompileNode.setup_context` once f's
    outputs are known: notes which of the tensors in the locals `outputs` and `sources` (in
    that order) the local `grad_fn` holds in its cells (Note [tensors grad_fn keeps, under
    compile]), by position. Asked without a context (by the question, or `_taken`): those
    positions, or None where nothing was noted (Dynamo's internals changed)."""
    if ctx is None:
        return _KEPT.take()  # type: ignore[no-any-return]
    _KEPT.clear()
    cells = traced_cells(ctx, "grad_fn")
    outputs, inputs = traced_items(ctx, "outputs"), traced_items(ctx, sources)
    if cells is not None and outputs is not None and inputs is not None:
        found = {id(t) for t in cells}
        held = [fake for _, fake in (*outputs[1], *inputs[1])]
        _KEPT.note(tuple(i for i, fake in enumerate(held) if id(fake) in found))
    return None


def _taken() -> tuple[int, ...] | None:
    """`kept_noted`'s answer (None where Dynamo does not trace: nothing was noted)."""
    return kept_noted() if dynamo_tracing() else None


def split_kind(kind: type, grad_fn_class: type) -> tuple[str, bool] | None:
    """For a pair whose items are of these classes: None where `split` refuses it (the second
    not callable), else how outputs of the first item's class are rebuilt ("one" tensor, a
    "tuple", or "tree": by their spec) and whether `torch.export` traces the call (Note
    [export] in `_export.py`). The outputs' class is read with `__class__` (`type()` of a
    tensor costs a guard on `Tensor` and one that compares it with torch's), grad_fn's with
    `type()` (`__class__` of a closure failed inside the traced `forward`, torch 2.13)."""
    if not callable_class(grad_fn_class):
        return None
    how = "one" if kind is torch.Tensor else "tuple" if kind is tuple else "tree"
    return how, is_exporting()


def refuse_split(f: Callable[..., Any], out: Any, described: str) -> NoReturn:
    """Refuse a compiled call whose f returned no `(outputs, grad_fn)`: a graph break (under
    `fullgraph=True`, the error, naming f), then `split`'s own error, raised outside Dynamo
    (traced, it misread f's name)."""
    graph_break(_split_reason(described))
    outside(split, f, out)
    raise AssertionError("unreachable: `split` refuses what `returned_checks` refused")


@run_while_tracing
def _split_reason(described: str) -> str:
    return (
        f"{PREFIX}{described} must return a pair (outputs, grad_fn) whose second item is "
        "callable, but it returned something else (without torch.compile, the error says "
        "what). Return `y, grad_fn`, where grad_fn takes the upstream gradients and returns "
        "the input gradients"
    )


class CompileNode(torch.autograd.Function):
    """The node of every decorated call while Dynamo traces (Note [compile]): f and grad_fn
    are arguments of `apply`, so one class serves every decorated function, and a decoration
    made while Dynamo traces needs no class of its own (Note [decorating while compiling]).
    `constants`: the call's `Layout` constants, the autocast state and the variables."""

    @staticmethod
    def forward(
        constants: _Constants,
        f: Callable[..., Any],
        grad_fn: Callable[..., Any],
        n_outputs: int,
        *tensors: torch.Tensor,
    ) -> torch.Tensor | tuple[torch.Tensor, ...]:
        # One output alone: torch's `autograd.Function` code reads `tuple` (a guard) to hand
        # several back
        if n_outputs == 1:
            return tensors[0].detach()
        return tuple(t.detach() for t in tensors[:n_outputs])

    # `backward`: `_COMPILE_BACKWARD`, generated below


def _setup_context(taken: Callable[[], Any]) -> Any:
    """`CompileNode.setup_context`, `kept_noted` (run while tracing) in a cell of it: read
    there, Dynamo guards it not (as a global, it cost this module's guard and its own)."""

    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        constants, f, grad_fn, n_outputs, *tensors = inputs
        variables = constants[5]
        ctx.grad_fn = grad_fn
        ctx.constants = (f, constants, n_outputs)
        # `Record.of_call`, written out with each tensor argument's class (`backward`): Dynamo
        # guards each name it reads (Note [compile guards]); a variable's gradient is like it
        # as a plain tensor (`__class__` of a Parameter costs a guard on torch 2.15)
        given = tensors[n_outputs:][: constants[3].__len__()]
        metas = [(t.__class__, t.shape, t.dtype, t.device) for t in given]
        ctx.metas = metas + [(None, t.shape, t.dtype, t.device) for t in variables]
        from torch._dynamo.comptime import comptime  # a local import: no guard

        # Note [tensors grad_fn keeps, under compile]
        outputs, sources = tensors[:n_outputs], tensors[n_outputs:]
        comptime(lambda c: kept_noted(c, "sources"))
        kept = taken()
        if kept is None:
            ctx.save_for_backward(*outputs, *sources)
        elif kept:
            held = [*outputs, *sources]
            ctx.save_for_backward(*[held[i] for i in kept])

    return staticmethod(setup_context)


CompileNode.setup_context = _setup_context(run_while_tracing(_taken))  # type: ignore[method-assign]


class InsideNode(torch.autograd.Function):
    """The node of a call whose f runs inside it (Note [f inside the compile node]): `apply`
    takes `(bound, spec, number of arguments, tensor positions, f described, autocast state,
    per argument whether it is a `Parameter`)`,
    f, its keyword arguments, the decoration's route question (`question` in
    `_compile.compiling_call`) and f's positional arguments, and returns f's one output, or its
    flattened outputs, then how `rebuilt` rebuilds them."""

    @staticmethod
    def forward(
        ctx: Any,
        layout: tuple[Any, ...],
        f: Callable[..., Any],
        kwargs: dict[str, Any],
        question: Callable[..., tuple[str, Any]],
        *args: Any,
    ) -> Any:
        _, _, n_args, positions, described, _, parameters = layout
        from torch._dynamo.comptime import comptime  # a local import: no guard

        # Note [edits in place under compile] in `_compile_exits.py` (it reads the locals);
        # the callbacks are literal lambdas, which Dynamo makes without a guard
        inputs = [args[i] for i in positions]
        comptime(lambda c: edits_checked(c))
        out = f(*args, **kwargs)
        comptime(lambda c: returned_noted(c))
        noted, checks = question("returned", None)
        if noted == "returned":
            edited, kind = checks
        else:  # Dynamo holds f's result in a form the note does not read: traced
            edited, pair = returned_checks(out.__class__, None)
            # `split`'s checks (`__len__`: the builtin `len` costs a guard)
            pair = pair and out.__len__() == 2
            kind = returned_checks(out[0].__class__, type(out[1])) if pair else None
        if edited:
            refuse_edited(edited)
        if not kind:
            refuse_split(f, out, described)
        result, grad_fn = out
        comptime(lambda c: handed_noted(c))
        handed = question("handed", None)[1]
        if handed:  # as f made them, grad_fn taking their upstreams: by their paths
            rebuild, paths = handed
            outputs = []
            for path in paths:
                o = result
                for key in path:
                    o = o[key]
                outputs.append(o)
            n_outputs = outputs.__len__()  # (the builtin `len` costs a guard)
        else:
            outputs, rebuild, _ = handed_outputs(f, result, inputs, kind)
            n_outputs = outputs.__len__()
            if n_outputs > 1:
                upstreams_checked(f, grad_fn, n_outputs, [], described)
        ctx.grad_fn = grad_fn
        ctx.question = question
        # Note [tensors grad_fn keeps, under compile]: run only while Dynamo traces
        comptime(lambda c: kept_noted(c))
        kept = question("kept", None)[1]
        if kept is None:
            ctx.save_for_backward(*outputs, *inputs)
        elif kept:
            held = [*outputs, *inputs]
            ctx.save_for_backward(*[held[i] for i in kept])
        ctx.constants = (f, layout, n_outputs)
        metas: list[Any] = [None] * n_args  # per argument, a tensor's class and `InputMeta`
        for i in positions:  # (a Parameter's: None, its gradient a plain tensor)
            t = args[i]
            metas[i] = (None if parameters[i] else t.__class__, t.shape, t.dtype, t.device)
        ctx.metas = metas
        # One output alone: torch's `autograd.Function` code reads `tuple` (a guard) to hand
        # several back, which come with their rebuilding last
        return outputs[0] if rebuild == "one" else (*outputs, rebuild)

    # `backward`: `_INSIDE_BACKWARD`, generated below


# The nodes' `backward`s, their test of a gradient rendered from `EXACT_LIKE_INPUT` (one home,
# in `_record.py`): written out, they read no global where every gradient is like its input (a
# global function, or the module, costs a guard: Note [compile guards] in `_compile.py`). Where
# one is not, the call's `Record` is built there and then, and its checks repair or refuse.
_CALLED = """
        code = getattr(ctx.grad_fn, "__code__", None)
        if code is None:  # (a cell: read only for such a grad_fn)
            code = code_of(ctx.grad_fn)
        if {edited}:
            upstream = unshared(upstream)
        try:
            returned = {call}
        except Exception as error:
            _break_at(error)
            if isinstance(error, TypeError):  # Note [upstreams under compile]
                check_upstreams(f, ctx.grad_fn, len(upstream), {variables})
            raise
"""
_ALL_LIKE = """
            i = 0
            for meta in metas:
                g = grads[i]
                if not ({like}):
                    break
                i += 1  # (`enumerate` is a global: a guard)
            else:
                return (*head, *grads)
"""
_INSIDE_BACKWARD = """
def backward(ctx, *upstream):
    f, (bound, spec, n_args, positions, _, autocast, _), n_outputs = ctx.constants
    upstream = upstream[:n_outputs]  # (not the rebuilding's)
    metas = ctx.metas
    head = (None, None, None, None)
    if not autocast:  # gradients like their inputs, as they are (Note [f inside ...])
        {called}
        grads = (returned,) if n_args == 1 else returned
        # (a literal's class and `__len__`: each builtin read costs a guard)
        if grads.__class__ is ().__class__ and grads.__len__() == n_args:
            {all_like}
    layout = Layout(f, bound, spec, n_args, positions)
    record = Record(layout, [metas[i][1:] for i in positions], [], autocast)
    needs = ctx.needs_input_grad
    needs = [needs[4 + i] for i in positions]
    if autocast:
        grads = _refused(record.gradients, ctx.grad_fn, upstream, needs)
    else:
        grads = _refused(record.checked, returned, needs)
    if len(grads) == n_args:
        return (*head, *grads)
    placed = [None] * n_args
    for i, grad in zip(positions, grads, strict=True):
        placed[i] = grad
    return (*head, *placed)
"""
# `CompileNode.backward`: where f read Parameters, grad_fn returns `(input_grads,
# variable_grads)` (item 34), taken as they are where the arguments are all tensors, the input
# gradients one tensor (one argument) or a tuple, the variables' a list or a tuple.
_COMPILE_BACKWARD = """
def backward(ctx, *upstream):
    f, (bound, spec, n_args, positions, autocast, variables), n_outputs = ctx.constants
    metas = ctx.metas
    head = (None,) * (4 + n_outputs)
    if not autocast:  # gradients like their inputs, as they are
        {called}
        grads = None
        if not variables:
            inputs, of_variables = returned, ()
        elif returned.__class__ is ().__class__ and returned.__len__() == 2:
            inputs, of_variables = returned
        else:  # (the checks of `Record.checked` say why not)
            inputs, of_variables = (), None
        if of_variables.__class__ is [].__class__ or of_variables.__class__ is ().__class__:
            if n_args == 1 and inputs.__class__ is not ().__class__:
                inputs = (inputs,)
            if inputs.__class__ is ().__class__ and positions.__len__() == n_args:
                grads = (*inputs, *of_variables)
        if grads is not None and grads.__len__() == metas.__len__():
            {all_like}
    layout = Layout(f, bound, spec, n_args, positions)
    record = Record(layout, [meta[1:] for meta in metas], variables, autocast)
    needs = ctx.needs_input_grad[4 + n_outputs :]
    if autocast:
        grads = _refused(record.gradients, ctx.grad_fn, upstream, needs)
    else:
        grads = _refused(record.checked, returned, needs)
    return (*head, *grads)
"""
_LIKE = EXACT_LIKE_INPUT.format(
    g="g", kind="meta[0]", shape="meta[1]", dtype="meta[2]", device="meta[3]"
)


def _generate(template: str, call: str, variables: str, like: str, edited: str) -> Any:
    """The backward of a template, `Tensor` (which `EXACT_LIKE_INPUT` reads where a gradient
    is not of its input's class), `edits_upstreams`, `unshared` and `code_of` in cells of it: a
    global costs this module's guard too. `edited`: whether grad_fn, of `code`, edits its upstreams
    (Note [f inside the compile node])."""
    called = _CALLED.format(call=call, variables=variables, edited=edited).strip()
    all_like = _ALL_LIKE.format(like=like).strip()
    source = template.format(called=called, all_like=all_like).replace("\n", "\n    ")
    generated: dict[str, Any] = {}
    source = f"def made(Tensor, edits_upstreams, unshared, code_of):{source}\n    return backward"
    exec(compile(source, "<tf_compat_grad compile backward>", "exec"), globals(), generated)
    return staticmethod(generated["made"](torch.Tensor, edits_upstreams, unshared, code_of))


InsideNode.backward = _generate(  # type: ignore[method-assign]
    _INSIDE_BACKWARD,
    "ctx.grad_fn(*upstream)",
    "[]",
    f"g is None if meta is None else ({_LIKE})",
    'ctx.question("edits", code)[1]',
)
CompileNode.backward = _generate(  # type: ignore[method-assign]
    _COMPILE_BACKWARD,
    "ctx.grad_fn(*upstream, variables=[*variables]) if variables else ctx.grad_fn(*upstream)",
    "variables",
    _LIKE,
    "edits_upstreams(code)",
)


def _refused(check: Callable[..., list[Any]], *args: Any) -> list[Any]:
    """`check(*args)`, a check of grad_fn's gradients (`Record.gradients`, `Record.checked`)."""
    try:
        return check(*args)
    except Exception as error:
        _break_at(error)
        raise


def _break_at(error: Exception) -> None:
    """Where Dynamo, tracing backward, met a refusal or grad_fn's own error: a graph break, so
    that backward runs as Python and raises it (under fullgraph=True, the error shows it)."""
    if is_dynamo_compiling():
        graph_break(str(error))
