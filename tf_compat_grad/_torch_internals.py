"""What depends on the installed torch version, decided once here so an upgrade is audited in
one file (see Note [compile on older torch]).

# Note [compile on older torch]
Under `torch.compile`, f runs inside the `ParameterWatcher` mode while Dynamo traces it (Note
[compile]). Dynamo before torch 2.13 cannot trace that correctly: 2.4 refuses to inline
`TorchFunctionMode.__init__`; 2.6 cannot trace `in` on a frozenset of functions, `type()` of a
nested function or `inspect.signature`; 2.8 passes FakeTensors to grad_fn; 2.9 refuses `id()`
of a Parameter; 2.10 to 2.12 fail a guard "on the same frame it was created". Where tracing
failed half-way, Dynamo counted a Parameter several times or left the mode on torch's stack.
There, a decorated call under `torch.compile` is a graph break: it runs outside Dynamo, as in
eager mode, so gradients and `variables` are eager mode's. Under `fullgraph=True` the graph
break is an error whose message names the torch version and what to do. Under a `torch.func`
transform inside the compiled region the call is refused instead: after the graph break, those
Dynamo releases resume inside the transform's own code and fail converting its wrapped tensors
(2.9 with an internal `is_leaf` assertion), so no release before 2.13 is trusted with it.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch.autograd import forward_ad
from torch.utils import _python_dispatch

from ._errors import PREFIX, describe

_F = TypeVar("_F", bound=Callable[..., Any])


def _release(version: str) -> tuple[int, int]:
    """`(major, minor)` of a torch version string such as `2.4.1+cu121` or `2.13.0a0+git1234`."""
    match = re.match(r"(\d+)\.(\d+)", version)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


TORCH_RELEASE = _release(torch.__version__)

# torch's private C entry points on the library's hot paths, named here once so that a torch
# upgrade is audited in this file. Each has existed unchanged from torch 2.4 to 2.15.
any_autocast_enabled = torch._C._is_any_autocast_enabled
functorch_transforms_active = torch._C._are_functorch_transforms_active
jit_tracing_state = torch._C._get_tracing_state
# Whether `torch.jit.trace` is tracing: `jit_tracing_state() is not None`, as `torch.jit.is_tracing`
# asks it, with no tracing state object made for Python.
jit_is_tracing = torch._C._is_tracing
# Grad mode set without `torch.no_grad`'s context manager: one guard fewer under compile.
set_grad_mode = torch._C._set_grad_enabled
# `Function.apply` without its Python wrapper (docs/torch_facts.md, "Function styles and
# torch.func").
function_apply_c = torch._C._FunctionBase.__dict__["apply"]
# The attribute of a node's context that `ctx.save_for_backward(*tensors)` sets to `tensors`,
# all that method does (torch's `FunctionCtx.save_for_backward`): the plans' nodes set it
# themselves, a Python call less per call (tests/test_saved_tensors.py checks the method).
SAVED_TENSORS = "to_save"
_functorch = torch._C._functorch
is_functorch_wrapped = _functorch.is_functorch_wrapped_tensor
# What `TorchFunctionMode.__enter__` and `__exit__` call, without their two Python frames each.
push_function_mode = torch._C._push_on_torch_function_stack
pop_function_mode = torch._C._pop_torch_function_stack


def grad_tracked(tensor: torch.Tensor) -> bool:
    """Whether a tensor depends on the inputs of a `torch.func` grad level: one of its grad
    level wrappers requires grad (a tensor computed at that level from its inputs, or an input
    itself, seen inside the node's forward)."""
    while _functorch.is_functorch_wrapped_tensor(tensor):
        if _functorch.is_gradtrackingtensor(tensor) and tensor.requires_grad:
            return True
        tensor = _functorch.get_unwrapped(tensor)
    return False


def call_backward_directly(node: type[torch.autograd.Function]) -> None:
    """Have the autograd engine call `node.backward` itself, as the node's `apply`.

    The engine calls `apply` on the class that `Function`'s metaclass generates for backward
    (`_backward_cls`), a Python method that looks up the user's `backward` or `vjp` and checks
    that not both are defined: about 50 Python instructions per backward, a tenth of the eager
    path's whole cost. The library's eager node defines `backward` alone, so the lookup always
    finds it. Kept when the class is not there (a torch that changed it).
    """
    backward_cls = getattr(node, "_backward_cls", None)
    if backward_cls is not None and "apply" in vars(torch.autograd.function.BackwardCFunction):
        backward_cls.apply = node.backward


# A version comparison, not a feature probe: each failure in Note [compile on older torch] is
# a Dynamo bug, not a missing attribute, and a probe that compiles would run inside the
# caller's own compilation (Dynamo reaches this flag while tracing a decorated call) and count
# as one of its graphs.
DYNAMO_TRACES_WATCHER = TORCH_RELEASE >= (2, 13)

# Whether a `torch.func.vmap`-generated backward takes a None upstream (torch 2.7 on; before,
# it batches None and fails): the transform node has its upstreams materialized where not.
VMAP_TAKES_NO_UPSTREAM = TORCH_RELEASE >= (2, 7)

# Whether `torch.export` traces the call (Note [export] in `_export.py`). torch before 2.6 has
# no such flag; there a decorated call runs outside Dynamo (Note [compile on older torch]),
# where `is_compiling` is true only for a non-strict export.
is_exporting = getattr(torch.compiler, "is_exporting", torch.compiler.is_compiling)

# What `torch.compile` does with a decorated call on this torch, in words (the checker's compile
# check and the version matrix's support table say it).
COMPILE_SUPPORT = (
    "one graph, fullgraph=True works (a graph break under a torch.func transform)"
    if DYNAMO_TRACES_WATCHER
    else "a graph break per decorated call, run as in eager mode; fullgraph=True raises"
)


def older_torch_reason(f: Callable[..., Any]) -> str:
    """Why a call of f leaves the compiled graph where Dynamo cannot trace the watcher, for
    Dynamo's error under `fullgraph=True` (Note [compile on older torch])."""
    return (
        f"{PREFIX}{describe(f)} runs outside torch.compile on torch {torch.__version__}, whose "
        "compiler cannot trace the watch for the Parameters it reads. Call torch.compile "
        "without fullgraph=True (the call is a graph break and runs as in eager mode, with the "
        "same gradients), export with `torch.export.export(..., strict=False)`, or upgrade to "
        "torch >= 2.13 for one graph"
    )


def older_torch_transform_error(f: Callable[..., Any]) -> str:
    """Why a call of f under a `torch.func` transform inside `torch.compile` is refused where
    Dynamo cannot trace the watcher (Note [compile on older torch])."""
    return (
        f"{PREFIX}{describe(f)} is called under a torch.func transform (grad, vjp, jvp, vmap, "
        f"...) inside torch.compile. On torch {torch.__version__} the call must leave the "
        "compiled graph, and this compiler then fails on the transform's tensors (an internal "
        "assertion, or a wrong result) as it resumes inside the transform. Run the transform "
        "without torch.compile (it follows the custom rule), or upgrade to torch >= 2.13, "
        "where the call leaves the graph safely"
    )


_disabled: Callable[..., Any] | None = None

# Whether Dynamo traces the caller (not a non-strict `torch.export`, which runs Python as it is).
is_dynamo_compiling = getattr(torch.compiler, "is_dynamo_compiling", torch.compiler.is_compiling)


def graph_break(reason: str) -> None:
    """Have Dynamo break the graph here: the code around runs as in eager mode; under
    `fullgraph=True` the error shows reason (torch >= 2.13; before, Dynamo's own words)."""
    import torch._dynamo

    if DYNAMO_TRACES_WATCHER:
        torch._dynamo.graph_break(msg=reason)
    else:
        torch._dynamo.graph_break()


def outside_compile(reason: str) -> Callable[..., Any]:
    """A function `(call, *args) -> call(*args)` that runs call with Dynamo off for it and every
    frame it runs. Dynamo graph-breaks at a call to it; under `fullgraph=True` it raises an error
    that shows reason."""

    def call_outside(call: Callable[..., Any], *args: Any) -> Any:
        global _disabled
        if _disabled is None:  # Dynamo is imported by now: its caller was being compiled
            _disabled = torch.compiler.disable(_call)  # type: ignore[no-untyped-call]
        return _disabled(call, *args)

    # `torch.compiler.disable`'s marks, set by hand: applying it here would import Dynamo with
    # the library. Spelled as a function's name too, so that every torch version shows it:
    # Dynamo's refusal prints the refused function (2.4 to 2.12) or the disable reason (newer).
    call_outside._torchdynamo_disable = True  # type: ignore[attr-defined]
    call_outside._torchdynamo_disable_msg = reason  # type: ignore[attr-defined]
    call_outside.__qualname__ = reason
    return call_outside


def _call(call: Callable[..., Any], *args: Any) -> Any:
    return call(*args)


def run_while_tracing(function: _F) -> _F:
    """function, which Dynamo runs as Python when it traces a call to it, its result a constant
    of the graph (`torch.compiler.assume_constant_result`'s mark, set by hand: applying it would
    import Dynamo with the library). Its arguments must be constants while Dynamo traces: code
    objects, numbers, strings."""
    function._dynamo_marked_constant = True  # type: ignore[attr-defined]
    return function


def traced_view(ctx: Any, tensors: str, function: str) -> tuple[Any, list[Any], Any]:
    """In a `torch._dynamo.comptime` callback, which Dynamo runs as Python while it traces the
    frame that calls `comptime`: that frame's translator, the fake tensors Dynamo holds for the
    items of its local list or tuple `tensors` (their `_version` counts the in-place ops traced
    on them; read in the graph, `_version` is a new unknown each time), and the code of its local
    `function`, None where that has none (torch >= 2.13: Note [edits in place under compile] in
    `_compile_exits.py`)."""
    frame = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator()
    local = ctx.get_local(tensors)
    items = local._i_will_not_complain_if_bc_breaks_VariableTracker().items
    fakes = [type(local)(item).as_fake() for item in items]
    held = ctx.get_local(function)._i_will_not_complain_if_bc_breaks_VariableTracker()
    code = held.get_code() if hasattr(held, "get_code") else None
    return frame, fakes, code


class Noted:
    """What a `comptime` callback noted while Dynamo traces, for code run while tracing (the
    route question) to take once: one trace at a time (Dynamo's compile lock)."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: list[Any] = []

    def note(self, value: Any) -> None:
        self._held[:] = [value]

    def clear(self) -> None:
        self._held.clear()

    def take(self) -> Any:
        """The value noted, once; None where nothing is."""
        return self._held.pop() if self._held else None


def traced_items(ctx: Any, name: str) -> tuple[type, list[tuple[type, Any]]] | None:
    """In a `comptime` callback: the class of the frame's local `name` (a tuple, a list or a
    dict) and, for each of its items (a dict's values), its class and, for a tensor, the fake
    tensor Dynamo holds (its `requires_grad` and layout are guarded with it), as Dynamo holds
    them: classes by `python_type`, which Dynamo's own `isinstance` reads (a tensor's class is
    pinned by its tensor guard, a constant's by its value); read with no guard of their own.
    None where Dynamo holds something this does not read."""
    try:
        local = ctx.get_local(name)
        held = local._i_will_not_complain_if_bc_breaks_VariableTracker()
        items = held.items
        found = []
        for item in items.values() if type(items) is dict else items:
            kind = item.python_type()
            fake = type(local)(item).as_fake() if issubclass(kind, torch.Tensor) else None
            found.append((kind, fake))
        return held.python_type(), found
    except Exception:  # (a tracker of another kind, or Dynamo's internals changed)
        return None


def traced_tree(ctx: Any, name: str) -> Any:
    """In a `comptime` callback: the frame's local `name` as a tree of plain tuples, lists and
    dicts (with constant keys) whose leaves are the fake tensors Dynamo holds of plain tensors
    (of class `Tensor`); None where Dynamo holds anything else in it."""
    local = ctx.get_local(name)
    wrap = type(local)

    def tree(held: Any) -> Any:
        kind = held.python_type()
        if kind is tuple or kind is list:
            return kind(tree(item) for item in held.items)
        if kind is dict:
            return {key.vt.as_python_constant(): tree(v) for key, v in held.items.items()}
        if kind is torch.Tensor:
            return wrap(held).as_fake()
        raise TypeError(kind)

    try:
        return tree(local._i_will_not_complain_if_bc_breaks_VariableTracker())
    except Exception:  # (another kind of value, or Dynamo's internals changed)
        return None


def traced_cells(ctx: Any, name: str) -> list[Any] | None:
    """In a `comptime` callback: the fake tensors that the cells of the frame's local function
    `name` hold (in tuples, lists and dicts too), where Dynamo holds a function defined in the
    traced code; none for another callable (a function made outside the traced frame; a
    `functools.partial`, a bound method, an object with `__call__`, whose tensors eager mode
    leaves unchecked too: Note [saved closures] in `_closure.py`); None where Dynamo's
    internals changed."""
    try:
        from torch._dynamo.variables import functions

        local = ctx.get_local(name)
        held = local._i_will_not_complain_if_bc_breaks_VariableTracker()
        if type(held) is not functions.NestedUserFunctionVariable:
            return []
        side_effects = ctx._i_will_not_complain_if_bc_breaks_InstructionTranslator().output
        side_effects = side_effects.side_effects
        found: list[Any] = []

        def leaves(value: Any) -> None:
            kind = value.python_type()
            if issubclass(kind, torch.Tensor):
                found.append(type(local)(value).as_fake())
            elif kind in (tuple, list):
                for item in value.items:
                    leaves(item)
            elif kind is dict:
                for item in value.items.values():
                    leaves(item)

        closure: Any = held.closure
        for cell in closure.items if closure is not None else ():
            leaves(side_effects.load_cell(cell))
        return found
    except Exception:  # (Dynamo's internals changed)
        return None


def traced_function(ctx: Any, name: str) -> Any:
    """In a `comptime` callback: the frame's local `name` where Dynamo holds a function, as
    the function itself where it was defined outside the traced code, else as `(code, whether
    defaults are set)`; None where it holds another kind of callable (or where Dynamo's
    internals changed), as `traced_items` and `traced_tree` answer."""
    try:
        from torch._dynamo.variables import functions

        held = ctx.get_local(name)._i_will_not_complain_if_bc_breaks_VariableTracker()
        if type(held) is functions.UserFunctionVariable:
            return held.get_function()
        if type(held) is functions.NestedUserFunctionVariable:
            return held.get_code(), held.defaults is not None
    except Exception:  # (Dynamo's internals changed)
        pass
    return None


def dynamo_tracing() -> bool:
    """Whether Dynamo is tracing a frame now: asked by a function that Dynamo runs as Python
    while it traces (`run_while_tracing`), which is also called as Python where a frame runs
    uncompiled."""
    return torch._guards.TracingContext.try_get() is not None


def nested_graph_breaks() -> bool:
    """Whether Dynamo, meeting a graph break inside a function it inlines, resumes there
    (`torch._dynamo.config.nested_graph_breaks`, off by default where it exists) instead of
    tracing the caller again with the call itself left out of the graph. Asked while Dynamo
    traces (Note [compile unwatched] in `_compile.py`)."""
    return bool(getattr(dynamo().config, "nested_graph_breaks", False))


def _transforms_active() -> bool:
    return functorch_transforms_active()


# Whether a `torch.func` transform is active, decided as Dynamo traces the call (Note [compile
# under torch.func]): Dynamo already decides it then (it has no guard on the functorch stack of
# a frame compiled outside a transform), and a plain call put the query into the graph.
transforms_active_while_tracing = run_while_tracing(_transforms_active)


_eval_frame = getattr(torch._C, "_dynamo", None)
_eval_frame = getattr(_eval_frame, "eval_frame", None)


def inlined_only(code: types.CodeType) -> None:
    """Mark a function's code so that Dynamo never compiles a frame of it on its own (it runs
    it as Python), while it still inlines it into a compiled caller and compiles the frames it
    runs. Where this torch cannot mark code so (before 2.6), nothing is done."""
    strategy = getattr(_eval_frame, "_FrameExecStrategy", None)
    if strategy is not None:
        actions = _eval_frame._FrameAction  # type: ignore[union-attr]
        _eval_frame.set_code_exec_strategy(  # type: ignore[union-attr]
            code, strategy(actions.SKIP, actions.DEFAULT)
        )


def never_compiled(function: Callable[..., Any]) -> Callable[..., Any]:
    """function, or a stand-in for it, whose frame and every frame it runs Dynamo skips,
    wherever it runs.

    For the methods of the `torch.func` node (Note [compile under torch.func]). Frame-level
    control is torch's C API (`torch._dynamo.skip` in Python, which imports Dynamo). Where this
    torch can mark a code object as skipped with every frame it runs (2.6 and later), function
    itself is marked. Before, only the frame itself can be marked: the stand-in's frame is, and
    it runs function with Dynamo's frame callback off, as `torch.compiler.disable` does.
    """
    strategy = getattr(_eval_frame, "_FrameExecStrategy", None)
    if strategy is not None:
        skip = _eval_frame._FrameAction.SKIP  # type: ignore[union-attr]
        _eval_frame.set_code_exec_strategy(function.__code__, strategy(skip, skip))  # type: ignore[union-attr]
        return function
    skip_code = getattr(_eval_frame, "skip_code", None)
    if skip_code is None:
        return function
    set_eval_frame = _eval_frame.set_eval_frame  # type: ignore[union-attr]

    def without_dynamo(*args: Any) -> Any:
        prior = set_eval_frame(None)
        try:
            return function(*args)
        finally:
            set_eval_frame(prior)

    skip_code(without_dynamo.__code__)
    return functools.wraps(function)(without_dynamo)


# --- forward-mode AD and torch.func: levels and wrapped tensors ------------------------------


def dual_level_active() -> bool:
    """Whether a `torch.autograd.forward_ad.dual_level` is entered."""
    return forward_ad._current_level >= 0


# Note [call modes]
# A call outside `torch.compile` is untransformed when no `torch.jit.trace`, `torch.func`
# transform or `forward_ad` dual level is around it; only then can f run before its node
# (Note [where f runs] in `_eager.py`), under grad mode or `torch.no_grad()`. The question is
# written once, as an expression: `untransformed` evaluates it for the general code, and the
# plans render it into their generated guard (`UNTRANSFORMED`, over the names `MODE_NAMES`).
UNTRANSFORMED = (
    "not jit_is_tracing() and not functorch_transforms_active() and forward_ad._current_level < 0"
)
MODE_NAMES: dict[str, Any] = {
    "jit_is_tracing": jit_is_tracing,
    "functorch_transforms_active": functorch_transforms_active,
    "forward_ad": forward_ad,
}
untransformed: Callable[[], bool] = eval(f"lambda: {UNTRANSFORMED}", dict(MODE_NAMES))


def any_dual(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether one of tensors carries a tangent of the active `torch.autograd.forward_ad` level
    (a dual tensor), so that the custom rule must give the outputs theirs (Note [transforms] in
    `_functorch.py`)."""
    if forward_ad._current_level < 0:  # no dual level: the usual case, decided without a call
        return False
    unpack = forward_ad.unpack_dual
    for tensor in tensors:
        # An integer or bool tensor has no tangent. A tensor of a `torch.func` transform has
        # its tangents in its wrappers' levels, which `differentiated_further` reads; torch
        # cannot unpack one that is batched (no batching rule for `_unpack_dual`: hessian of a
        # rule whose grad_fn calls a decorated function on an index tensor).
        if not has_tangent_space(tensor) or is_functorch_wrapped(tensor):
            continue
        if unpack(tensor).tangent is not None:  # type: ignore[no-untyped-call]
            return True
    return False


def has_tangent_space(tensor: torch.Tensor) -> bool:
    """Integer and bool tensors (indices, masks) have no tangents: constants of a rule."""
    return tensor.is_floating_point() or tensor.is_complex()


def primals(tensors: Sequence[torch.Tensor]) -> Sequence[torch.Tensor]:
    """tensors without their tangents of the active `torch.autograd.forward_ad` level (their
    reverse-mode history kept): what a jvp rule computes the outputs' tangents from. A dual
    tensor there would have each decorated call in grad_fn compute tangents again, through its
    own grad_fn, without end (Note [transforms] in `_functorch.py`). A Function's `forward`
    runs with forward grad off, which hides the tangents: they are looked up with it on."""
    if forward_ad._current_level < 0:
        return tensors
    with forward_ad._set_fwd_grad_enabled(True):
        unpacked = [
            forward_ad.unpack_dual(t) if has_tangent_space(t) else None  # type: ignore[no-untyped-call]
            for t in tensors
        ]
    return [
        t if u is None or u.tangent is None else u.primal
        for t, u in zip(tensors, unpacked, strict=True)
    ]


def differentiated_further(inputs: Sequence[torch.Tensor]) -> str | None:
    """Why grad_fn must be made again from the inputs as this backward (or jvp) sees them:
    "jvp" or "grad" when an enclosing forward- or reverse-mode level differentiates them again,
    "vmap" when this rule runs batched (torch's generated vmap rule), so the tensors grad_fn
    captured in forward belong to a vmap level that has ended; None when grad_fn can be used
    (Note [transforms] in `_functorch.py`; docs/torch_facts.md, "Wrapper levels")."""
    from torch._functorch.pyfunctorch import retrieve_all_functorch_interpreters

    alive = {i.level(): i.key() for i in retrieve_all_functorch_interpreters()}
    found = None
    for tensor in inputs:
        if _functorch.is_batchedtensor(tensor):
            found = "vmap"
        # The first grad-tracking wrapper is this rule's own level; batching wrappers (vmap)
        # differentiate nothing.
        own = False
        while _functorch.is_functorch_wrapped_tensor(tensor):
            if _functorch.is_gradtrackingtensor(tensor):
                level = _functorch.maybe_get_level(tensor)
                if own and level in alive:
                    if alive[level] == _functorch.TransformType.Jvp:
                        return "jvp"
                    found = "grad"
                own = True
            tensor = _functorch.get_unwrapped(tensor)
        if own and tensor.requires_grad and torch.is_grad_enabled():
            found = "grad"
    return found


# --- the checker ------------------------------------------------------------------------------

TorchDispatchMode = _python_dispatch.TorchDispatchMode


def dynamo() -> Any:
    """`torch._dynamo`, imported on first use: importing it is slow, and the library itself never
    needs it (docs/torch_facts.md, "Importing Dynamo")."""
    import torch._dynamo

    return torch._dynamo
