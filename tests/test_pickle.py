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
from torch import nn

import tf_compat_grad
from tf_compat_grad import CustomGradient, custom_gradient, recompute_grad

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


def test_a_method_wrapper_pickled_by_0_1_0_loads():
    """0.1.0 pickled the `CustomGradient` of a decorated method as `getattr(method,
    "__tf_compat_grad__")`: such a pickle loads the wrapper itself."""

    class As010:
        def __reduce__(self):
            return getattr, (Layer.forward, "__tf_compat_grad__")

    loaded = pickle.loads(pickle.dumps(As010()))
    assert isinstance(loaded, CustomGradient) and loaded is round_trip(loaded)


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
    """A decorated function is a function, refused by pickle as one; a wrapper object of a
    function pickle cannot find is refused by the library."""
    closure = worker.make_closure()
    with pytest.raises((AttributeError, pickle.PicklingError), match=r"make_closure\.<locals>"):
        pickle.dumps(closure)
    block = recompute_grad(closure.__wrapped__)
    with pytest.raises(pickle.PicklingError, match=exactly(messages.cannot_pickle(block))):
        pickle.dumps(block)


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


# --- copy.deepcopy ---------------------------------------------------------------------------


def _local_softsign():
    """A decorated function defined inside another, which pickle cannot find by name."""

    @custom_gradient
    def softsign(x):
        return x / (1 + x.abs()), lambda dy: dy / (1 + x.abs()) ** 2  # the true derivative

    return softsign


class EmaHost(nn.Module):
    """A model holding a local decorated function and a layer with a decorated forward, as one
    deep-copied for an exponential moving average of its weights."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(2, 2, dtype=worker.D)
        self.act = _local_softsign()
        self.layer = Layer()

    def forward(self, x):
        return self.layer(self.act(self.linear(x)))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: worker.triple, id="module-level function"),
        pytest.param(_local_softsign, id="local function"),
        pytest.param(lambda: tf_compat_grad.grad_pass_through(lambda x: x.round()), id="lambda"),
        pytest.param(worker.make_closure, id="closure"),
    ],
)
def test_deepcopy_of_a_decorated_function_is_the_function(make):
    """Functions are atomic for `deepcopy`; a decorated one too, wherever it is defined (a
    local one used to raise PicklingError)."""
    fn = make()
    assert copy.deepcopy(fn) is fn
    assert copy.copy(fn) is fn


def test_deepcopy_of_a_model_holding_decorated_functions_for_an_ema():
    model = EmaHost()
    ema = copy.deepcopy(model)
    assert ema.act is model.act
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(0.5)  # an EMA update: the copy's weights move, the model's do not
    x = torch.tensor([[0.5, -1.5], [2.0, 0.3]], dtype=worker.D)
    for net in (model, ema):
        # The reference: the copy's own decorated parts replaced by plain modules of the same
        # gradients (softsign's is its true derivative; `Layer`'s through its own copy).
        custom = torch.autograd.grad(net(x).sum(), list(net.parameters()))
        h = net.linear(x)
        true = torch.autograd.grad(
            net.layer(h / (1 + h.abs())).sum(), list(net.parameters()), allow_unused=True
        )
        for c, t in zip(custom, true, strict=True):
            torch.testing.assert_close(c, t)
    assert not torch.equal(ema.linear.weight, model.linear.weight)
    fresh = EmaHost()  # built directly with the copy's weights: the same gradients
    fresh.load_state_dict(ema.state_dict())
    for c, t in zip(
        torch.autograd.grad(ema(x).sum(), list(ema.parameters())),
        torch.autograd.grad(fresh(x).sum(), list(fresh.parameters())),
        strict=True,
    ):
        torch.testing.assert_close(c, t)


def test_deepcopy_of_a_block_of_a_layer_wraps_a_copy_of_the_layer():
    """What was decorated is copied when it copies to something else: the copy's block runs the
    copy's layer, whose weights an EMA then moves."""
    inner = nn.Linear(2, 2, dtype=worker.D)
    host = nn.ModuleDict({"inner": inner})
    host.block = recompute_grad(inner)
    copied = copy.deepcopy(host)
    assert copied.block.__wrapped__ is copied["inner"]  # one copy, shared through the memo
    with torch.no_grad():
        copied["inner"].weight.mul_(0.5)
    x = torch.tensor([[0.5, -1.5]], dtype=worker.D)
    torch.testing.assert_close(copied.block(x), copied["inner"](x))


def test_deepcopy_of_a_module_with_a_decorated_forward():
    layer = Layer()
    copied = copy.deepcopy(layer)
    assert type(copied).forward is type(layer).forward
    torch.testing.assert_close(
        worker.gradients(copied, x_value()), worker.gradients(Layer(), x_value())
    )
