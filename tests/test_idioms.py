"""The PyTorch idioms people use around a decorated function, each compared with plain autograd
of the same math written without the decorator (or, where the library refuses, with the
refusal's whole message): autocast with loss scaling, activation checkpointing, complex and half
dtypes, channels_last, in-place edits of outputs and of arguments, tensor and module hooks,
`state_dict`, threads, `torch.func` transforms, nested decorated functions, `gradcheck`,
`retain_graph`, `backward(gradient=)`, `allow_unused`, integer inputs and outputs that are
inputs, views of inputs or need no gradient.

The decorated functions carry their true gradient, written with differentiable ops, so that
every first and second derivative must equal autograd's. (Spawned workers: `test_pickle.py`;
functional_call and parametrizations: `test_captures.py`; compile: `test_compose.py`.)
"""

import threading

import messages
import pytest
import torch
from helpers import D
from messages import exactly
from torch import nn
from torch.func import grad, hessian, jacfwd, jacrev, jvp, linearize, vjp, vmap
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import CustomGradientValueError, custom_gradient


@custom_gradient
def softplus(x):
    s = torch.sigmoid(x)
    return torch.log1p(torch.exp(x)), lambda dy: dy * s


def plain_softplus(x):
    return torch.log1p(torch.exp(x))


@custom_gradient
def mul_add(x, y):
    """Two inputs, two outputs: `(x * y, x + sin(y))`."""

    def grad_fn(d_mul, d_add):
        return d_mul * y + d_add, d_mul * x + d_add * torch.cos(y)

    return (x * y, x + torch.sin(y)), grad_fn


def plain_mul_add(x, y):
    return x * y, x + torch.sin(y)


@custom_gradient
def outer(x):
    """Calls a decorated function in f and in grad_fn: `2 softplus(x)`."""

    def grad_fn(dy):
        return 2 * dy * (softplus(x) - softplus(x) + torch.sigmoid(x))

    return 2 * softplus(x), grad_fn


def plain_outer(x):
    return 2 * plain_softplus(x)


def _seeded(*shape, dtype=D, seed=0):
    return torch.randn(shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))


def _grads(fn, *args, create_graph=False, values=None):
    """Gradients of a weighted sum of fn's outputs with respect to each argument that requires
    grad, on fresh copies of the arguments (the outputs appended to `values`)."""
    args = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    outputs = fn(*args)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    if values is not None:
        values.extend(o.detach() for o in outputs)
    loss = sum((o * _seeded(*o.shape, dtype=o.dtype, seed=i)).sum() for i, o in enumerate(outputs))
    wanted = [a for a in args if a.requires_grad]
    return torch.autograd.grad(loss, wanted, create_graph=create_graph), wanted


def _assert_same_gradients(decorated, plain, *args, **tolerance):
    """The same outputs and the same gradients."""
    got_values, expected_values = [], []
    got, _ = _grads(decorated, *args, values=got_values)
    expected, _ = _grads(plain, *args, values=expected_values)
    for g, e in zip([*got_values, *got], [*expected_values, *expected], strict=True):
        torch.testing.assert_close(g, e, **tolerance)


# --- autocast, loss scaling, checkpointing --------------------------------------------------


class Block(nn.Module):
    def __init__(self, activation):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 4)
        self.activation = activation

    def forward(self, x):
        return self.activation(self.linear(x))


def test_autocast_bfloat16_with_loss_scaling():
    """GradScaler's loss scaling (scale, backward, divide by the scale): the gradients are
    autograd's (to bf16 precision), and the linear layer's bf16 outputs reach f and grad_fn in
    the forward's autocast state."""
    grads = []
    for activation in (softplus, plain_softplus):
        block = Block(activation)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = block(_seeded(3, 4, dtype=torch.float32)).float().sum()
        scaler.scale(loss).backward()
        grads.append([p.grad / scaler.get_scale() for p in block.parameters()])
    for got, expected in zip(*grads, strict=True):
        assert got.dtype == expected.dtype == torch.float32
        torch.testing.assert_close(got, expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint(reentrant):
    x, plain_x = _seeded(5).requires_grad_(), _seeded(5).requires_grad_()
    checkpoint(lambda t: outer(t * 2) * 3, x, use_reentrant=reentrant).sum().backward()
    (plain_outer(plain_x * 2) * 3).sum().backward()
    torch.testing.assert_close(x.grad, plain_x.grad)


# --- dtypes and memory formats -------------------------------------------------------------


@custom_gradient
def square(z):
    return z * z, lambda dy: dy * (2 * z).conj()  # torch's convention: conjugate Wirtinger


@custom_gradient
def abs_squared(z):
    return (z * z.conj()).real, lambda dy: dy * 2 * z


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex(dtype):
    z = _seeded(3, dtype=dtype)
    z.requires_grad_()
    _assert_same_gradients(lambda t: square(t).abs() ** 2, lambda t: (t * t).abs() ** 2, z)
    _assert_same_gradients(abs_squared, lambda t: (t * t.conj()).real, z)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision(dtype):
    x = _seeded(5, dtype=torch.float32).to(dtype).requires_grad_()
    got, _ = _grads(softplus, x)
    expected, _ = _grads(plain_softplus, x)
    assert got[0].dtype == dtype
    torch.testing.assert_close(got, expected)


def test_channels_last_keeps_the_gradients_memory_format():
    x = _seeded(2, 3, 4, 5).to(memory_format=torch.channels_last).requires_grad_()
    got, _ = _grads(softplus, x)
    expected, _ = _grads(plain_softplus, x)
    torch.testing.assert_close(got, expected)
    assert got[0].stride() == expected[0].stride()


# --- in-place edits ------------------------------------------------------------------------


EDITS = {
    "add_": lambda y: y.add_(1),
    "setitem": lambda y: y.__setitem__(0, 0.0),
    "mul_": lambda y: y.mul_(2),
}


@custom_gradient
def identity(x):
    s = torch.sigmoid(x)  # a closure cell, so that the eager fast path takes the call
    return x, lambda dy: dy + 0 * s


@custom_gradient
def head(x):
    return x[:2], lambda dy: torch.cat([dy, dy.new_zeros(x.shape[0] - 2)])


OUTPUTS = {
    "new tensor": (softplus, plain_softplus),
    "the input": (identity, lambda t: t.clone()),
    "a view of the input": (head, lambda t: t[:2].clone()),
}


def _edited_then_input_used(fn, edit):
    def computed(x):
        x = x * 1  # not a leaf, so that plain autograd allows the edit of a view of it
        y = fn(x)
        EDITS[edit](y)
        return y, torch.sin(x)

    return computed


@pytest.mark.parametrize("edit", EDITS)
@pytest.mark.parametrize("output", OUTPUTS)
def test_in_place_edit_of_an_output(output, edit):
    """An output that is an input, or a view of one, is a new tensor (item 10): editing it in
    place leaves the input as it was, and later uses of the input get the true gradient. Under
    `torch.func.grad` too, where editing any output is allowed, as plain autograd allows it."""
    decorated, plain = (_edited_then_input_used(fn, edit) for fn in OUTPUTS[output])
    x = _seeded(4).requires_grad_()
    for _ in range(2):  # the first call and the fast path
        _assert_same_gradients(decorated, plain, x)

    def loss(fn):
        return lambda x: sum((o * o).sum() for o in fn(x))

    torch.testing.assert_close(grad(loss(decorated))(x.detach()), grad(loss(plain))(x.detach()))


@custom_gradient
def twice(x):
    y = torch.exp(x)
    return (y, y[:2]), lambda d1, d2: (d1 + torch.cat([d2, d2.new_zeros(1)])) * torch.exp(x)


def test_in_place_edit_of_an_output_leaves_the_others_as_they_were():
    """Outputs that share memory in f (`(y, y[:2])`) are separate new tensors (item 10)."""
    x = _seeded(3).requires_grad_()
    first, second = twice(x)
    first.mul_(2)
    torch.testing.assert_close(second, torch.exp(x[:2]).detach())
    (first.sum() + (second**2).sum()).backward()
    torch.testing.assert_close(
        x.grad, (2 + torch.cat([2 * torch.exp(x[:2]), torch.zeros(1)])) * torch.exp(x).detach()
    )


@custom_gradient
def exp_in_place(x):
    x.exp_()
    return x, lambda dy: dy * x


def test_in_place_edit_of_an_argument_that_requires_grad_is_refused():
    for _ in range(2):
        with pytest.raises(
            CustomGradientValueError, match=exactly(messages.edited_in_place(exp_in_place, "x"))
        ):
            exp_in_place(_seeded(3).requires_grad_() * 1)
    torch.testing.assert_close(exp_in_place(torch.zeros(2)), torch.ones(2))  # no gradient


# --- hooks, state_dict, threads ------------------------------------------------------------


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 3, dtype=D))

    @custom_gradient
    def forward(self, x):
        def grad_fn(dy, variables):
            return dy * self.w, [(dy * x).sum(0)]

        return x * self.w, grad_fn


class PlainScale(Scale):
    def forward(self, x):
        return x * self.w


def _hooked(module, seen):
    module.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
    module.register_forward_hook(lambda m, args, out: out * 2)
    module.register_full_backward_hook(lambda m, gin, gout: seen.append((gin, gout)))
    return module


def test_tensor_and_module_hooks():
    results = []
    for module in (Scale(), PlainScale()):
        seen = []
        x = _seeded(2, 3).requires_grad_()
        x.register_hook(lambda g: g * 3)
        y = _hooked(module, seen)(x)
        y.register_hook(lambda g: g + 1)
        y.sum().backward()
        results.append((x.grad, module.w.grad, *seen[0][0], *seen[0][1]))
    for got, expected in zip(*results, strict=True):
        torch.testing.assert_close(got, expected)


def test_state_dict_round_trip(tmp_path):
    source = Scale()
    with torch.no_grad():
        source.w.mul_(3)
    torch.save(source.state_dict(), tmp_path / "scale.pt")
    loaded, plain = Scale(), PlainScale()
    loaded.load_state_dict(torch.load(tmp_path / "scale.pt", weights_only=True))
    plain.load_state_dict(source.state_dict())
    for module in (loaded, plain):
        module(_seeded(2, 3)).sum().backward()
    torch.testing.assert_close(loaded.w.grad, plain.w.grad)
    assert loaded.state_dict().keys() == {"w"}


def test_threads_with_different_grad_modes():
    errors = []

    def work(mode):
        try:
            for i in range(10):
                x = _seeded(4, seed=i).requires_grad_()
                if mode == 0:
                    with torch.no_grad():
                        assert softplus(x).grad_fn is None
                elif mode == 1:
                    softplus(x).sum().backward()
                    torch.testing.assert_close(x.grad, torch.sigmoid(x.detach()))
                else:
                    got = grad(lambda t: softplus(t).sum())(x.detach())
                    torch.testing.assert_close(got, torch.sigmoid(x.detach()))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i % 3,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


# --- torch.func and autograd.functional ----------------------------------------------------

X, Y, V = _seeded(3, seed=1), _seeded(3, seed=2), _seeded(3, seed=3)
TRANSFORMS = {
    "jacrev": lambda f: jacrev(f, argnums=(0, 1))(X, Y),
    "jacfwd": lambda f: jacfwd(f, argnums=(0, 1))(X, Y),
    "hessian": lambda f: hessian(lambda x, y: sum(o.sum() ** 2 for o in f(x, y)), argnums=(0, 1))(X, Y),
    "linearize": lambda f: linearize(lambda x: f(x, Y), X)[1](V),
    "jvp": lambda f: jvp(f, (X, Y), (V, V)),
    "vjp": lambda f: vjp(f, X, Y)[1]((V, V)),
    "vmap": lambda f: vmap(f, in_dims=(0, None))(torch.stack([X, Y]), Y),
    "vmap jacrev": lambda f: vmap(jacrev(f))(torch.stack([X, Y]), torch.stack([Y, X])),
    "autograd.functional.hessian": lambda f: torch.autograd.functional.hessian(lambda x: f(x, Y)[0].sum() ** 2, X, create_graph=True),
}  # fmt: skip


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.filterwarnings("ignore:Attempted to insert a get_attr Node")  # torch's, in linearize
def test_transforms(transform):
    torch.testing.assert_close(TRANSFORMS[transform](mul_add), TRANSFORMS[transform](plain_mul_add))


def test_nested_decorated_functions_first_and_second_order():
    x = _seeded(3).requires_grad_()
    got, (leaf,) = _grads(outer, x, create_graph=True)
    expected, (plain_leaf,) = _grads(plain_outer, x, create_graph=True)
    torch.testing.assert_close(got, expected)
    second = torch.autograd.grad(got[0].sum(), leaf)
    torch.testing.assert_close(second, torch.autograd.grad(expected[0].sum(), plain_leaf))
    torch.testing.assert_close(
        hessian(lambda t: outer(t).sum())(X), hessian(lambda t: plain_outer(t).sum())(X)
    )


def test_gradcheck_and_gradgradcheck():
    x, y = X.clone().requires_grad_(), Y.clone().requires_grad_()
    assert torch.autograd.gradcheck(mul_add, (x, y), check_forward_ad=True, check_batched_grad=True)
    assert torch.autograd.gradgradcheck(mul_add, (x, y))
    assert torch.autograd.gradgradcheck(outer, (x,))


# --- functional_call, with a grad_fn that reads the module's weight --------------------------


class Affine(nn.Module):
    """grad_fn reads `self.weight` when the gradient is computed (TensorFlow ports do): under
    `functional_call` that must be the tensor f computed with, not the module's own Parameter
    that `functional_call` has put back by then."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(_seeded(3, 3, seed=4))
        self.bias = nn.Parameter(_seeded(3, seed=5))

    @custom_gradient
    def forward(self, x):
        def grad_fn(dy, variables=None):
            return dy @ self.weight, [dy.t() @ x, dy.sum(0)]

        return x @ self.weight.t() + self.bias, grad_fn


class PlainAffine(Affine):
    def forward(self, x):
        return x @ self.weight.t() + self.bias


XS = _seeded(4, 2, 3, seed=6)
OTHER = {"weight": _seeded(3, 3, seed=7), "bias": _seeded(3, seed=8)}


def _loss(module):
    return lambda params, x: (torch.func.functional_call(module, params, (x,)) ** 2).sum()


FUNCTIONAL = {
    "grad, the module's own Parameters": lambda m: grad(_loss(m))(dict(m.named_parameters()), XS[0]),
    "grad, other tensors": lambda m: grad(_loss(m), argnums=(0, 1))(OTHER, XS[0]),
    "vmap grad, per-sample": lambda m: vmap(grad(_loss(m)), in_dims=(None, 0))(dict(m.named_parameters()), XS),
    "hessian": lambda m: hessian(_loss(m))(OTHER, XS[0]),
    "ensemble": lambda m: vmap(_loss(m), in_dims=(0, None))(torch.func.stack_module_state([m, m])[0], XS[0]),
}  # fmt: skip


@pytest.mark.parametrize("case", FUNCTIONAL)
def test_functional_call(case):
    torch.testing.assert_close(FUNCTIONAL[case](Affine()), FUNCTIONAL[case](PlainAffine()))


def test_functional_call_eager_with_other_tensors():
    results = []
    for module in (Affine(), PlainAffine()):
        params = {k: v.clone().requires_grad_() for k, v in OTHER.items()}
        x = XS[0].clone().requires_grad_()
        _loss(module)(params, x).backward()
        results.append((x.grad, params["weight"].grad, params["bias"].grad))
    torch.testing.assert_close(*results)


# --- what backward is asked, and what f is given and returns -------------------------------


def test_retain_graph_backward_twice_and_a_given_gradient():
    x = X.clone().requires_grad_()
    y = softplus(x)
    y.backward(V, retain_graph=True)
    y.backward(V)
    torch.testing.assert_close(x.grad, 2 * V * torch.sigmoid(X))


def test_allow_unused_and_materialize_grads():
    x, unused = X.clone().requires_grad_(), Y.clone().requires_grad_()
    assert torch.autograd.grad(softplus(x).sum(), [x, unused], allow_unused=True)[1] is None
    zeros = torch.autograd.grad(softplus(x).sum(), [x, unused], materialize_grads=True)[1]
    torch.testing.assert_close(zeros, torch.zeros_like(Y))


def test_an_input_with_requires_grad_turned_off():
    _assert_same_gradients(
        mul_add, plain_mul_add, X.clone().requires_grad_(), Y.clone().requires_grad_(False)
    )


@custom_gradient
def masked_scale(x, n, mask):
    return x * n * mask, lambda dy: (dy * n * mask, None, None)


def test_integer_and_bool_inputs():
    n, mask = torch.tensor([1, 2, 3]), torch.tensor([True, False, True])
    _assert_same_gradients(
        lambda x: masked_scale(x, n, mask), lambda x: x * n * mask, X.clone().requires_grad_()
    )


def test_a_none_output_is_refused_naming_it():
    @custom_gradient
    def with_none(x):
        return (x * 2, None), lambda dy, _: dy * 2

    message = messages.unusable_output(with_none, "None (NoneType)", "[1]")
    with pytest.raises(TypeError, match=exactly(message)):
        with_none(X.clone().requires_grad_())


@custom_gradient
def with_index(x):
    """An integer output (no gradient) and a detached one (grad_fn's rule all the same)."""
    return (x * 2, torch.argmax(x), x.detach() * 3), lambda d, _, d3: 2 * d + 3 * d3


def test_outputs_that_need_no_gradient():
    x = X.clone().requires_grad_()
    doubled, index, tripled = with_index(x)
    assert not index.requires_grad and index.dtype == torch.int64
    assert tripled.requires_grad  # an output of the custom op, as in TensorFlow
    (doubled + tripled).sum().backward()
    torch.testing.assert_close(x.grad, torch.full_like(X, 5.0))
