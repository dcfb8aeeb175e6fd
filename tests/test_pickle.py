"""Pickling decorated functions: by reference, as plain functions are, so that spawned workers,
`DataLoader` workers, task queues and `torch.save` of a module can carry them.

A wrapper found under its qualified name pickles as that name; one that is not (`block =
recompute_grad(f)`, a block bound to an instance) is remade from its `__wrapped__` by the
decorator that made it. The objects pickled live in `_pickled.py` (see there why).
"""

import copy
import io
import multiprocessing
import pickle
from pathlib import Path

# `_pickled` is imported by its plain name (tests/ is on pytest's pythonpath): the spawned
# processes unpickle its objects by that name.
import _pickled as worker
import messages
import pytest
import torch
from messages import exactly

from tf_compat_grad import CustomGradient, recompute_grad

TIMEOUT_S = 120.0  # a worker that hangs fails the test instead of blocking CI


Layer = worker.Layer


def x_value():
    return torch.tensor([0.5, -1.5], dtype=worker.D)


def round_trip(obj):
    return pickle.loads(pickle.dumps(obj))


BY_REFERENCE = [
    pytest.param(lambda: worker.triple, id="module-level function"),
    pytest.param(lambda: worker.sin_block, id="@recompute_grad"),
    pytest.param(lambda: Layer.forward, id="method, from the class"),
    pytest.param(lambda: Layer.forward.__tf_compat_grad__, id="method's CustomGradient"),
    pytest.param(lambda: Layer.double, id="@staticmethod above"),
    pytest.param(lambda: Layer.halve, id="@staticmethod below"),
]


@pytest.mark.parametrize("get", BY_REFERENCE)
def test_pickles_by_reference(get):
    obj = get()
    assert round_trip(obj) is obj


def test_class_method_pickles_bound_to_the_class():
    method = Layer.shrink
    loaded = round_trip(method)
    assert loaded == method and loaded.__self__ is Layer
    torch.testing.assert_close(
        worker.gradients(loaded, x_value()), worker.gradients(method, x_value())
    )


@pytest.mark.parametrize(
    ("wrapped", "f"),
    [
        pytest.param(worker.recomputed, worker.tanh2, id="recompute_grad(f)"),
        pytest.param(worker.rounded, torch.round, id="grad_pass_through(torch.round)"),
    ],
)
def test_wrapper_under_another_name_is_remade_from_f(wrapped, f):
    loaded = round_trip(wrapped)
    assert type(loaded) is CustomGradient and loaded is not wrapped
    assert loaded.__wrapped__ is f
    torch.testing.assert_close(
        worker.gradients(loaded, x_value()), worker.gradients(wrapped, x_value())
    )


def test_example_survives_remaking():
    wrapped = recompute_grad(worker.tanh2)
    wrapped.example = (1.0,)
    assert round_trip(wrapped).example == (1.0,)


def save_and_load(layer):
    buffer = io.BytesIO()
    torch.save(layer, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


def test_torch_save_of_an_object_holding_them():
    loaded = save_and_load({"fn": worker.triple, "block": worker.recomputed, "layer": Layer()})
    assert loaded["fn"] is worker.triple
    assert loaded["block"].__wrapped__ is worker.tanh2
    torch.testing.assert_close(
        worker.gradients(loaded["layer"], x_value()), worker.gradients(Layer(), x_value())
    )


@pytest.mark.parametrize("copier", [round_trip, save_and_load, copy.deepcopy])
def test_module_copy_binds_its_block_to_the_copy(copier):
    """A block bound to the instance is remade bound to the copy, so the copy's Parameter gets
    the gradient (a deepcopy used to keep the original's block: no gradient for the copy)."""
    layer = Layer()
    copied = copier(layer)
    assert copied.block.__wrapped__.__self__ is copied
    torch.testing.assert_close(
        worker.gradients(copied.block, x_value()), worker.gradients(Layer().block, x_value())
    )
    torch.testing.assert_close(
        worker.gradients(copier(layer), x_value()), worker.gradients(Layer(), x_value())
    )
    assert layer.weight.grad is None


def test_closure_is_refused_by_name():
    closure = worker.make_closure()
    with pytest.raises(pickle.PicklingError, match=exactly(messages.cannot_pickle(closure))):
        pickle.dumps(closure)


def spawn_cases():
    """(name, function) pairs sent to the worker; fresh modules on every call, so that the
    reference computed here does not add to the Parameters' gradients sent."""
    return [
        ("module-level function", worker.triple),
        ("@recompute_grad", worker.sin_block),
        ("recompute_grad(f)", worker.recomputed),
        ("grad_pass_through(torch.round)", worker.rounded),
        ("module with a decorated forward", Layer()),
        ("bound forward", Layer().forward),
        ("block bound to a module", Layer().block),
        ("staticmethod", Layer.double),
        ("classmethod", Layer.shrink),
    ]


@pytest.mark.slow
def test_spawned_worker_computes_the_custom_gradients(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # sys.path the worker starts with
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        result = pool.starmap_async(worker.gradients, [(fn, x_value()) for _, fn in spawn_cases()])
        received = result.get(timeout=TIMEOUT_S)
    for (name, fn), grads in zip(spawn_cases(), received, strict=True):
        expected = worker.gradients(fn, x_value())
        assert all(g is not None for g in expected), name
        torch.testing.assert_close(grads, expected, msg=name)


@pytest.mark.slow
def test_dataloader_spawned_worker_computes_the_custom_gradients(monkeypatch):
    """`DataLoader(num_workers=1)` with spawn pickles the dataset, decorated functions and
    modules in it, to its worker."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    cases = spawn_cases()
    loader = torch.utils.data.DataLoader(
        worker.Gradients([fn for _, fn in cases], x_value()),
        batch_size=None,
        num_workers=1,
        multiprocessing_context="spawn",
        timeout=TIMEOUT_S,
    )
    for (name, fn), grads in zip(spawn_cases(), loader, strict=True):
        torch.testing.assert_close(grads, worker.gradients(fn, x_value()), msg=name)
