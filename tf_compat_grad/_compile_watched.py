"""The watched route of a compiled call: f under `CompiledWatcher`, then `CompileNode` (Note
[compile] in `_compile.py`), and the trace-time constants of the compiled calls' layout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from . import _autocast, _run, _structure
from ._captures import CapturedRule, lost_under_compile_reason, settle
from ._compile_exits import edits_checked, outside, refuse_edited, upstreams_checked
from ._compile_node import (
    CompileNode,
    accepts_noted,
    refuse_split,
    returned_checks,
    returned_noted,
)
from ._compile_outputs import handed_noted, handed_outputs, rebuilt
from ._export import exported
from ._plan_shape import NUMBERS
from ._run import UNBOUND, call_f
from ._structure import leaves
from ._torch_internals import graph_break, run_while_tracing, set_grad_mode
from ._variables import check_accepts, code_accepts_variables
from ._watcher import CompiledWatcher, op_noted

_grad_enabled = torch.is_grad_enabled
# The decoration's route question (`question` in `_compile.compiling_call`)
Question = Callable[[Any, Any], tuple[str, Any]]


def _calling(
    watcher_class: type[CompiledWatcher], set_grad: Callable[[bool], None], node: Any
) -> Callable[..., Any]:
    """`call_compiled`, which reads the watcher's class, grad mode's setter and the node's class
    from its cells: a global of this module costs the module's guard too (Note [compile
    guards])."""

    def call_compiled(
        f: Callable[..., Any],
        bound: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        described: str,
        captured: CapturedRule = "refuse",
        unwatched: Question | None = None,
        question: Question | None = None,
        route: tuple[Any, bool, Any] | None = None,
    ) -> Any:
        """Call f through the compile node (Note [compile]). `described`: f by name, file and
        line, made before Dynamo traces (which misreads f's attributes); `captured`: the rule
        of `custom_gradient(captured=...)`; `unwatched`: the question that decided to run f
        without the watcher (Note [compile unwatched]), else None; `question`: the
        decoration's route question, which answers what the `comptime` callbacks noted (else
        the checks are traced), and `route` its answer's constants.
        Written for few guards (Note [compile guards])."""
        if route is not None and route[0] is not None:
            layout, prior = route[0], route[1]
            inputs: Sequence[torch.Tensor] = [args[i] for i in layout[3]]
        else:
            layout = plain_layout(bound is not UNBOUND, [arg.__class__ for arg in args], True)
            if layout is not None and not any(args[i].is_nested for i in layout[3]):
                inputs = [args[i] for i in layout[3]]
            else:
                _, full, inputs = _run.inputs(f, bound, args)
                layout = (full.bound, full.spec, full.n_args, full.positions, _autocast_now())
            prior = _grad_enabled()
        watcher = None
        if unwatched is None:
            keywords: Any = ()
            if kwargs:  # the watcher looks for the Parameters among them, in any order
                values = [*kwargs.values()]
                keywords = (
                    values if _leaf_classes([v.__class__ for v in values]) else leaves(kwargs)
                )
            # (`CompiledWatcher(...)`: Dynamo's instantiation reads `type` and `issubclass`)
            watcher = watcher_class.__new__(watcher_class)
            watcher.start(inputs, keywords, op_noted if question is None else question)
        from torch._dynamo.comptime import comptime  # a local import: no guard

        # Note [edits in place under compile] in `_compile_exits.py`; `versions` where this
        # frame runs as Python (a graph break in f, inside this `try`); literal lambdas: no guard
        versions: list[int] = []
        comptime(lambda c: edits_checked(c), lambda: versions.extend([t._version for t in inputs]))
        setter = set_grad if watcher is None else watcher.set_grad
        setter(False)
        try:
            if watcher is None:
                out = f(*args, **kwargs)
            else:
                with watcher:
                    out = call_f(f, bound, args, kwargs) if layout[0] else f(*args, **kwargs)
        finally:
            setter(prior)
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
            # At call time, as TensorFlow (item 33); read from grad_fn's code while tracing,
            # from Dynamo's tracker where the question answers (`accepts_noted`).
            if variables:
                comptime(lambda c: accepts_noted(c))
                accepts = question is not None and question("accepts", None)[1]
                if not accepts and not code_accepts_variables(
                    type(grad_fn), getattr(grad_fn, "__code__", None)
                ):
                    check_accepts(f, bound, grad_fn, variables)
        sources = [*inputs, *variables]
        handed = None
        if question is not None:  # the hand-over read from the trackers (`handed_noted`)
            comptime(lambda c: handed_noted(c, "sources"))
            handed = question("handed", None)[1]
        if handed and handed[0] == "one":  # f's one output goes over as f made it
            outputs, rebuild = [result], "one"
        else:
            outputs, rebuild, _ = handed_outputs(f, result, sources, kind)
        if kind[1]:  # Note [export] in `_export.py`
            outputs = exported(described, outputs, sources)
        else:
            # Note [lost gradients under compile] in `_captures.py`
            if watcher is not None and watcher.reaches(result, rebuild == "one"):
                graph_break(lost_under_compile_reason(described))  # under fullgraph=True, the error
                variables = outside(
                    settle, f, bound, kwargs, watcher.seeds, inputs, variables, (), captured
                )
                check_accepts(f, bound, grad_fn, variables)
            if prior and (variables or any(t.requires_grad for t in inputs)):
                n_outputs = outputs.__len__()  # (the builtin `len` costs a guard)
                if n_outputs > 1:  # Note [upstreams under compile] in `_compile_exits.py`
                    upstreams_checked(f, grad_fn, n_outputs, variables, described)
                outputs = node.apply(
                    (*layout, variables), f, grad_fn, n_outputs, *outputs, *inputs, *variables
                )
                if n_outputs == 1:  # one alone (`CompileNode.forward`)
                    outputs = [outputs]
        return outputs[0] if rebuild == "one" else rebuilt(rebuild, outputs)  # (a global: a guard)

    return call_compiled


call_compiled = _calling(CompiledWatcher, set_grad_mode, CompileNode)


# Trace-time constants of the compile path, read from classes (Note [compile guards]).


@run_while_tracing
def _leaf_classes(kinds: list[type]) -> bool:
    """Whether values of these classes are leaves of a structure (`_structure.py`)."""
    return not any(issubclass(kind, _structure._CONTAINERS) for kind in kinds)


@run_while_tracing
def plain_layout(
    bound: bool, kinds: Sequence[type], autocast: bool = False
) -> tuple[Any, ...] | None:
    """The `Layout` constants of a call whose positional arguments are of these types, when
    each is a tensor or a Python number or string (which `_run.inputs` accepts as they are),
    with `autocast`: then the autocast state (`CompileNode`'s constants); None otherwise."""
    positions = tuple(i for i, kind in enumerate(kinds) if issubclass(kind, torch.Tensor))
    if len(positions) + sum(kind in NUMBERS for kind in kinds) != len(kinds):
        return None
    layout = bound, _structure.tuple_spec(len(kinds)), len(kinds), positions
    return (*layout, _autocast.current()) if autocast else layout


@run_while_tracing
def _autocast_now() -> Any:
    return _autocast.current()
