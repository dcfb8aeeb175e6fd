"""Bytes kept alive by an autograd graph, counted two ways.

Census (the figures reported): a `TorchDispatchMode` active during forward and backward keeps a
*weak* reference to the storage of every tensor any aten op returns. At a checkpoint, the bytes
kept alive are the storages still alive, deduplicated by storage, less the storages of what the
benchmark itself holds (inputs, Parameters, upstream gradients, outputs while referenced, `.grad`
after backward). Whoever keeps a storage alive (a saved tensor in a C++ node, a ctx attribute, a
closure, a reference cycle, a cache) it is counted; an input saved for backward is not, as the
benchmark holds it anyway and freeing the graph would not give its memory back.

Graph walk (a cross-check, in the JSON): from the outputs' `grad_fn`, follow `next_functions`,
read every `_saved_*` attribute of built-in nodes and `saved_tensors` of custom ones, scan the
Python attributes of custom nodes (ctx attributes, and through them containers, objects and
closures), and follow the `grad_fn` of each tensor found. It sees only what is reachable from the
outputs, so it cannot run once they are dropped.
"""

from __future__ import annotations

import contextlib
import gc
import types
from collections.abc import Iterable
from typing import Any

import torch
from torch.autograd.function import BackwardCFunction
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

try:
    from torch.multiprocessing.reductions import StorageWeakRef
except ImportError:  # older torch
    from torch.utils.weak import StorageWeakRef  # type: ignore[no-redef]


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # sparse, meta, ...
        return None


class Census(TorchDispatchMode):
    """Weak references to the storage of every tensor an op returns while the mode is active,
    with the name of the first op that returned it."""

    def __init__(self) -> None:
        super().__init__()
        self.storages: dict[int, tuple[StorageWeakRef, int, str]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                try:
                    storage = leaf.untyped_storage()
                except (RuntimeError, NotImplementedError):
                    continue
                ref = StorageWeakRef(storage)
                if ref.cdata not in self.storages:
                    self.storages[ref.cdata] = (ref, storage.nbytes(), str(func))
        return out

    def live(self, held: Iterable[torch.Tensor]) -> tuple[int, dict[str, int]]:
        """Bytes of the storages still alive that are not held, in all and by the op that made
        them."""
        held_keys = {_storage_key(t) for t in held}
        by_op: dict[str, int] = {}
        for key, (ref, nbytes, op) in self.storages.items():
            if key not in held_keys and not ref.expired():
                by_op[op] = by_op.get(op, 0) + nbytes
        return sum(by_op.values()), by_op


def graph_walk_bytes(outputs: list[torch.Tensor], held: Iterable[torch.Tensor]) -> int:
    """Bytes of the storages reachable from the outputs' graph, less the held ones."""
    walk = _GraphWalk()
    walk.nodes.extend(t.grad_fn for t in outputs if t.grad_fn is not None)
    walk.run()
    held_keys = {_storage_key(t) for t in held}
    return sum(nbytes for key, nbytes in walk.found.items() if key not in held_keys)


class _GraphWalk:
    """The storages reachable from graph nodes. Holds what it visits until it is dropped, and
    makes no reference cycle, so dropping it frees them at once."""

    def __init__(self) -> None:
        self.found: dict[int, int] = {}  # storage key -> bytes
        self.nodes: list[Any] = []
        self.seen: dict[int, Any] = {}  # id -> object, kept alive so that ids stay unique

    def run(self) -> None:
        nodes = self.nodes
        while nodes:
            node = nodes.pop()
            if id(node) in self.seen:
                continue
            self.seen[id(node)] = node
            for name in dir(node):
                if name.startswith("_saved_"):
                    try:
                        value = getattr(node, name)
                    except RuntimeError:  # freed by backward
                        continue
                    for leaf in value if isinstance(value, (list, tuple)) else (value,):
                        if isinstance(leaf, torch.Tensor):
                            self.tensor(leaf)
            if isinstance(node, BackwardCFunction):  # a custom Function's node is its ctx
                try:
                    saved = node.saved_tensors
                except RuntimeError:  # freed by backward
                    saved = ()
                for t in saved:
                    if t is not None:
                        self.tensor(t)
                for value in vars(node).values():
                    self.scan(value, 0)
            nodes.extend(n for n, _ in node.next_functions if n is not None)

    def tensor(self, t: torch.Tensor) -> None:
        key = _storage_key(t)
        if key is not None:
            self.found.setdefault(key, t.untyped_storage().nbytes())
        if t.grad_fn is not None:
            self.nodes.append(t.grad_fn)

    def scan(self, value: Any, depth: int) -> None:
        """Tensors and graph nodes inside a ctx attribute: through containers, objects' fields
        and functions' closures and defaults (not their globals)."""
        if depth > 6 or id(value) in self.seen or isinstance(value, (types.ModuleType, type)):
            return
        if isinstance(getattr(value, "next_functions", None), tuple):  # a graph node
            self.nodes.append(value)
            return
        self.seen[id(value)] = value
        items: Iterable[Any] = ()
        if isinstance(value, torch.Tensor):
            self.tensor(value)
        elif isinstance(value, dict):
            if "__builtins__" not in value:  # a module's globals: not the graph's
                items = value.values()
        elif isinstance(value, (list, tuple, set, frozenset)):
            items = value
        elif isinstance(value, types.FunctionType):
            items = [*(value.__closure__ or ()), value.__defaults__, value.__kwdefaults__]
        elif isinstance(value, types.CellType):
            with contextlib.suppress(ValueError):  # an empty cell
                items = [value.cell_contents]
        else:
            fields = [getattr(value, name, None) for name in getattr(type(value), "__slots__", ())]
            items = [*fields, getattr(value, "__dict__", None)]
        for item in items:
            self.scan(item, depth + 1)


def _warm_up() -> None:
    """Enter a dispatch mode once before measuring: the first entry imports `torch._dynamo`
    (torch wraps the mode machinery in `_disable_dynamo`), and that import leaves reference
    cycles holding every frame on the stack, the user's f included, until a `gc.collect()`."""
    with Census():
        torch.zeros(1) + 1
    gc.collect()


def measure(impl: Any) -> dict[str, Any]:
    """Bytes kept alive after forward, after backward while the outputs live, after dropping
    the outputs (no `gc.collect()`: automatic collection is off from forward to here), and
    after a `gc.collect()`; with the ops that made what is kept, and the graph walk's figures."""
    _warm_up()
    impl.reset()
    gc.collect()
    census = Census()
    held = impl.held()
    figures: dict[str, Any] = {}
    kept: dict[str, dict[str, int]] = {}
    gc.disable()
    try:
        with census:
            outputs = impl.memory_forward()
        figures["after_forward"], kept["after_forward"] = census.live([*held, *outputs])
        figures["graph_walk_after_forward"] = graph_walk_bytes(outputs, [*held, *outputs])
        with census:
            torch.autograd.backward(outputs, impl.upstream)
        grads = [t.grad for t in impl.leaves if t.grad is not None]
        held = [*held, *grads]
        figures["after_backward"], kept["after_backward"] = census.live([*held, *outputs])
        figures["graph_walk_after_backward"] = graph_walk_bytes(outputs, [*held, *outputs])
        del outputs
        figures["after_drop"], kept["after_drop"] = census.live(held)
    finally:
        gc.enable()
    gc.collect()
    figures["after_gc_collect"], kept["after_gc_collect"] = census.live(held)
    del grads, held
    impl.reset()
    figures["kept_by_op"] = {point: ops for point, ops in kept.items() if ops}
    return figures
