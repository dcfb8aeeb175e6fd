"""Differential tests of the PyTorch idioms users reach a decorated function through, mixed in
one call: a method of a Module reading a Parameter through an index chosen by a Python int,
a namedtuple of tensors and a Python number as positional arguments, a number by keyword,
nested outputs (a dict of a tensor and a list); then the same function called through
`copy.deepcopy`, pickling, `torch.utils.checkpoint` (both reentrant settings), autocast,
`torch.func` (`functional_call` under `grad`, `vmap` of `grad`, `jvp`, `hessian`) and
`torch.compile`, with views and in-place edits of its outputs, non-contiguous and expanded
inputs, `retain_graph` and derivatives to the third order. Each is compared with plain autograd
of the same math (a subclass whose `forward` is the undecorated math), or must be refused by a
library error that names f. `tests/test_route_properties.py` covers the eager routes' proofs
on generated plain functions; this file covers the idioms around the call."""

import collections
import copy
import pickle

import pytest
import torch
from helpers import D, where
from torch import nn
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import CustomGradientError, custom_gradient

Pair = collections.namedtuple("Pair", "a b")


class Stack(nn.Module):
    """`sin(a * w_i) * b * k * scale` with `w_i = self.ws[i]`, as `{"u": y, "v": [3 * y]}`:
    grad_fn gives the true derivatives, for the variable it is handed (by identity)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.ws = nn.ParameterList(
            [nn.Parameter(torch.rand(3, generator=g, dtype=D) + 0.5) for _ in range(3)]
        )

    @custom_gradient
    def forward(self, pair, i, k, *, scale=1.0):
        w = self.ws[i]
        y = torch.sin(pair.a * w) * pair.b * k * scale

        def grad(du, dv, variables=None):  # upstreams in flattened order: "u", then "v"[0]
            dy = du + 3 * dv
            c = dy * torch.cos(pair.a * w) * pair.b * k * scale
            inputs = (Pair(c * w, dy * torch.sin(pair.a * w) * k * scale), None, None)
            if variables is None:
                return inputs
            return inputs, [c * pair.a if v is w else None for v in variables]

        return {"u": y, "v": [3 * y]}, grad


class PlainStack(Stack):
    """The same math, differentiated by autograd."""

    def forward(self, pair, i, k, *, scale=1.0):
        y = torch.sin(pair.a * self.ws[i]) * pair.b * k * scale
        return {"u": y, "v": [3 * y]}


def _pair(seed, shape=(3,)):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(shape, generator=g, dtype=D) - 0.5).requires_grad_()
    b = (torch.rand(shape, generator=g, dtype=D) + 0.5).requires_grad_()
    return a, b


def _derivatives(module, call, seed, order=3, retain=False):
    """The value of `call(module, a, b, i)` and its derivatives to `order` w.r.t. a, b and all
    of module's Parameters (weighted sums, one backward per order; a first backward that
    retains the graph first when `retain`), for the Parameter `i = seed % 3`."""
    a, b = _pair(seed)
    out = call(module, a, b, seed % 3)
    inputs = [a, b, *module.ws]
    found = [out["u"].detach(), out["v"][0].detach()]
    total = (out["u"] * 1.5 + out["v"][0] * 0.5).pow(2).sum()
    if retain:
        found += _dense(torch.autograd.grad(total, inputs, retain_graph=True, allow_unused=True))
    for n in range(order):
        grads = torch.autograd.grad(total, inputs, create_graph=n < order - 1, allow_unused=True)
        found += _dense(grads)
        total = sum((g * (j + 1) * 0.7).sum() for j, g in enumerate(grads) if g is not None)
    return found


def _dense(grads):
    return [torch.zeros(3, dtype=D) if g is None else g.detach() for g in grads]


def _pair_of_modules():
    decorated = Stack()
    plain = PlainStack()
    plain.load_state_dict(decorated.state_dict())
    return decorated, plain


def _direct(module, a, b, i):
    return module(Pair(a, b), i, 1.5, scale=2.0)


def _unbound(module, a, b, i):
    return type(module).forward(module, Pair(a, b), i, 1.5, scale=2.0)


def _checkpointed(module, a, b, i):
    return checkpoint(lambda a, b: _direct(module, a, b, i), a, b, use_reentrant=False)


# (how the module is reached, how it is called, the highest order that way supports)
WAYS = {
    "bound method": (lambda m: m, _direct, 3),
    "Class.forward(obj, ...)": (lambda m: m, _unbound, 3),
    "deepcopy": (copy.deepcopy, _direct, 3),
    "pickled": (lambda m: pickle.loads(pickle.dumps(m)), _direct, 2),
    "checkpoint, non-reentrant": (lambda m: m, _checkpointed, 3),
}


@pytest.mark.parametrize("way", WAYS)
def test_a_method_reached_every_way_matches_plain_autograd(way):
    """Four calls each (the general code, then the planned calls), a different Parameter
    picked by the Python int on each, to the third derivative."""
    reach, call, order = WAYS[way]
    decorated, plain = _pair_of_modules()
    decorated, plain = reach(decorated), reach(plain)
    for seed in range(4):
        want = _derivatives(plain, call, seed, order)
        got = _derivatives(decorated, call, seed, order)
        torch.testing.assert_close(got, want)


def test_a_copy_gives_its_own_parameters_the_gradients():
    original, _ = _pair_of_modules()
    copied = copy.deepcopy(original)
    a, b = _pair(0)
    (_direct(copied, a, b, 1)["u"]).sum().backward()
    assert copied.ws[1].grad is not None
    assert all(w.grad is None for w in original.ws)


def test_reentrant_checkpoint_with_retained_graph_matches_plain_autograd():
    """Reentrant checkpointing supports `backward` only (not `autograd.grad`), and tensors
    (not a dict) as the checkpointed function's outputs."""
    found = []
    for module in _pair_of_modules():
        a, b = _pair(1)

        def block(a, b, module=module):
            out = _direct(module, a, b, 2)
            return out["u"], out["v"][0]

        u, v = checkpoint(block, a, b, use_reentrant=True)
        total = (u * 1.5 + v * 0.5).pow(2).sum()
        total.backward(retain_graph=True)
        total.backward()
        found.append([a.grad, b.grad, *(_dense([w.grad for w in module.ws]))])
    torch.testing.assert_close(found[0], found[1])


def test_autocast_bfloat16_matches_plain_autograd_under_autocast():
    """grad_fn runs in the forward's autocast state: float32 inputs, a bfloat16 matmul."""
    weight = nn.Parameter(torch.linspace(-1, 1, 16).reshape(4, 4))

    @custom_gradient
    def linear(x, k):
        y = (x @ weight) * k

        def grad(dy, variables=None):
            return (dy @ weight.T * k, None), [x.T @ dy * k]

        return y, grad

    found = []
    for fn in (linear, lambda x, k: (x @ weight) * k):
        x = torch.linspace(-1, 1, 8).reshape(2, 4).requires_grad_()
        for _ in range(3):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = fn(x, 0.5)
            found.append((y, *torch.autograd.grad(y.float().pow(2).sum(), (x, weight))))
    for got, want in zip(found[:3], found[3:], strict=True):
        assert got[0].dtype == want[0].dtype == torch.bfloat16
        torch.testing.assert_close(got, want)


class Cubes:
    """A classmethod reading a class attribute and a staticmethod, decorated as the docs say
    (`@custom_gradient` above `@classmethod`)."""

    scale = 2.0

    @custom_gradient
    @classmethod
    def cube(cls, x, k):
        def grad(dy):
            return dy * cls.scale * k * 3 * x * x, None

        return cls.scale * k * x**3, grad

    @custom_gradient
    @staticmethod
    def square(x, k):
        def grad(dy):
            return dy * 2 * k * x, None

        return k * x * x, grad


class MoreCubes(Cubes):
    scale = 5.0


CLASS_CALLS = {
    "classmethod on the class": (lambda x: Cubes.cube(x, 1.5), lambda x: 2.0 * 1.5 * x**3),
    "classmethod on a subclass's instance": (
        lambda x: MoreCubes().cube(x, 1.5),
        lambda x: 5.0 * 1.5 * x**3,
    ),
    "staticmethod on an instance": (lambda x: Cubes().square(x, 0.5), lambda x: 0.5 * x * x),
}


@pytest.mark.parametrize("call", CLASS_CALLS)
def test_class_and_static_methods_match_plain_autograd_eagerly_and_under_torch_func(call):
    decorated, plain = CLASS_CALLS[call]
    for _ in range(3):
        x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=True)
        want = _two_orders(lambda x=x: plain(x), (x,))
        torch.testing.assert_close(_two_orders(lambda x=x: decorated(x), (x,)), want)
    x = torch.tensor([[0.3, -0.5, 1.1]], dtype=D)
    for transform in (torch.func.hessian, lambda fn: torch.func.vmap(torch.func.grad(fn))):
        want = transform(lambda x: plain(x).sum())(x)
        torch.testing.assert_close(transform(lambda x: decorated(x).sum())(x), want)


# --- torch.func ---------------------------------------------------------------------------


def test_functional_call_under_grad_gives_the_read_slot_its_gradient():
    """The slot f reads (picked by the Python int) is the variable; grad_fn answers None for
    the others it is handed, and they get zeros, as plain autograd gives them."""
    decorated, plain = _pair_of_modules()
    params = {k: v.detach().clone() for k, v in decorated.named_parameters()}
    for i in range(3):
        a, b = (t.detach() for t in _pair(i))

        def loss(params, module, a=a, b=b, i=i):
            out = torch.func.functional_call(module, params, (Pair(a, b), i, 1.5), {"scale": 2.0})
            return (out["u"] + out["v"][0]).pow(2).sum()

        want = torch.func.grad(loss)(params, plain)
        got = torch.func.grad(loss)(params, decorated)
        torch.testing.assert_close(got, want)


class Symmetric(nn.Module):
    def forward(self, weight):
        return weight + weight.T


class Linear(nn.Module):
    """`x @ self.weight * k`, its weight parametrized to be symmetric."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(-1, 1, 9, dtype=D).reshape(3, 3))
        torch.nn.utils.parametrize.register_parametrization(self, "weight", Symmetric())

    @custom_gradient
    def forward(self, x, k):
        weight = self.weight

        def grad(dy, variables=None):
            return (dy @ weight.T * k, None), [x.T @ dy * k]

        return x @ weight * k, grad


def test_functional_call_of_a_parametrized_weight_under_a_transform_is_refused_naming_f():
    """The original in the parameter slot would get grad_fn's gradient of the weight as its
    own, without the parametrization's chain rule; eagerly the chain rule is applied."""
    module = Linear()
    x = torch.linspace(-1, 1, 6, dtype=D).reshape(2, 3)
    params = {k: v.detach().clone() for k, v in module.named_parameters()}

    def loss(params):
        return torch.func.functional_call(module, params, (x, 1.5)).pow(2).sum()

    with pytest.raises(CustomGradientError, match="parametrization") as info:
        torch.func.grad(loss)(params)
    assert where(Linear.forward) in str(info.value)
    eager = x.clone().requires_grad_()
    original = module.parametrizations.weight.original
    got = torch.autograd.grad(module(eager, 1.5).pow(2).sum(), original)
    weight = original + original.T
    torch.testing.assert_close(got, torch.autograd.grad((x @ weight * 1.5).pow(2).sum(), original))


TRANSFORMS = {
    "vmap of grad": lambda m, a, b: torch.func.vmap(
        torch.func.grad(lambda a, b: _direct(m, a, b, 1)["v"][0].sum(), argnums=(0, 1))
    )(a, b),
    "jvp": lambda m, a, b: torch.func.jvp(
        lambda a, b: _direct(m, a, b, 2)["v"][0], (a[0], b[0]), (b[0], a[0])
    ),
    "hessian": lambda m, a, b: torch.func.hessian(lambda a: _direct(m, a, b[0], 0)["u"].sum())(
        a[0]
    ),
    "jacrev of jacrev": lambda m, a, b: torch.func.jacrev(
        torch.func.jacrev(lambda a: _direct(m, a, b[0], 1)["u"])
    )(a[0]),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
def test_transforms_of_the_method_match_plain_autograd(transform):
    decorated, plain = _pair_of_modules()
    a, b = (t.detach() for t in _pair(3, (2, 3)))
    want = TRANSFORMS[transform](plain, a, b)
    torch.testing.assert_close(TRANSFORMS[transform](decorated, a, b), want)


w_read = nn.Parameter(torch.tensor([0.7, 1.2, 0.9], dtype=D))


@custom_gradient
def sin_w(x):
    y = torch.sin(x * w_read)

    def grad(dy, variables=None):
        c = dy * torch.cos(x * w_read)
        return c * w_read, [c * x]

    return y, grad


# An outer backward through a transform's result, to a Parameter that f reads: a gradient
# penalty (`torch.func.grad` of a critic, then the penalty's backward), or a vmapped forward.
OUTER = {
    "grad": lambda fn, x: torch.func.grad(lambda x: fn(x).pow(2).sum())(x),
    "vmap": lambda fn, x: torch.func.vmap(fn)(x[None])[0],
    "jvp primal": lambda fn, x: torch.func.jvp(fn, (x,), (torch.ones_like(x),))[0],
    "jvp tangent": lambda fn, x: torch.func.jvp(fn, (x,), (torch.ones_like(x),))[1],
    "jacrev": lambda fn, x: torch.func.jacrev(fn)(x),
}


@pytest.mark.parametrize("transform", OUTER)
def test_an_outer_backward_through_a_transform_reaches_the_parameters_f_reads(transform):
    x = torch.tensor([0.3, -0.5, 1.1], dtype=D)
    found = []
    for fn in (sin_w, lambda x: torch.sin(x * w_read)):
        out = OUTER[transform](fn, x)
        found.append(torch.autograd.grad(out.sum() + w_read.sum(), w_read)[0])
    torch.testing.assert_close(found[0], found[1])


def test_the_penalty_by_autograd_grad_reaches_the_parameters_f_reads():
    """The eager way to the same gradient penalty, `torch.autograd.grad(..., create_graph=True)`,
    gets every term of the Parameter's gradient too."""
    found = []
    for fn in (sin_w, lambda x: torch.sin(x * w_read)):
        x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=True)
        (g,) = torch.autograd.grad(fn(x).pow(2).sum(), x, create_graph=True)
        found.append(torch.autograd.grad(g.pow(2).sum(), w_read)[0])
    torch.testing.assert_close(found[0], found[1])


# --- views, in-place edits and layouts ------------------------------------------------------


@custom_gradient
def scaled_exp(x, k):
    """`exp(x * w) * k`, grad_fn recomputing what it needs (it keeps no output)."""
    y = torch.exp(x * w_read) * k

    def grad(dy, variables=None):
        d = dy * torch.exp(x * w_read) * k
        return (d * w_read, None), [d * x]

    return y, grad


@custom_gradient
def scaled_exp_keeping_y(x, k):
    y = torch.exp(x * w_read) * k

    def grad(dy, variables=None):
        d = dy * y
        return (d * w_read, None), [d * x]

    return y, grad


def _edited(fn, seed):
    """An output edited in place through a view and directly, then squared; first and second
    derivatives, with a retained graph differentiated twice."""
    x0 = (torch.rand(3, generator=torch.Generator().manual_seed(seed), dtype=D)).requires_grad_()
    y = fn(x0 * 1, 2.0)
    y[1:].mul_(3.0)
    y.add_(1.0)
    total = (y * y).sum()
    first = torch.autograd.grad(total, (x0, w_read), create_graph=True)
    again = torch.autograd.grad(total, (x0, w_read), retain_graph=True)
    second = torch.autograd.grad(sum(g.sum() for g in first), (x0, w_read))
    return [y.detach(), *first, *again, *second]


def test_in_place_edits_of_an_output_through_a_view_match_plain_autograd():
    for seed in range(3):
        want = _edited(lambda x, k: torch.exp(x * w_read) * k, seed)
        torch.testing.assert_close(_edited(scaled_exp, seed), want)


def test_an_output_that_grad_fn_keeps_edited_in_place_is_torchs_version_error():
    for seed in range(3):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _edited(scaled_exp_keeping_y, seed)


def _holding_w(holder):
    """`sin(x * w)` whose grad_fn holds w (a Parameter) in a cell, in a tuple in a cell, or as
    a default, and maps `variables` by identity, as item 35 of docs/tensorflow_semantics.md
    says portable code does."""
    w = w_read
    box = (w,)

    @custom_gradient
    def by_identity(x):
        def cell(dy, variables=None):
            c = dy * torch.cos(x * w)
            return c * w, [c * x if v is w else None for v in variables]

        def boxed(dy, variables=None):
            c = dy * torch.cos(x * box[0])
            return c * box[0], [c * x if v is box[0] else None for v in variables]

        def default(dy, variables=None, w=w):
            c = dy * torch.cos(x * w)
            return c * w, [c * x if v is w else None for v in variables]

        return torch.sin(x * w), {"cell": cell, "tuple": boxed, "default": default}[holder]

    return by_identity


HOOKS = {
    "none": lambda fn, x: fn(x),
    "save_on_cpu": lambda fn, x: _under_save_on_cpu(fn, x),
    "checkpoint": lambda fn, x: checkpoint(fn, x, use_reentrant=False),
}


def _under_save_on_cpu(fn, x):
    with torch.autograd.graph.save_on_cpu():
        return fn(x)


@pytest.mark.parametrize("holder", ["cell", "tuple", "default"])
@pytest.mark.parametrize("hooks", HOOKS)
def test_a_parameter_grad_fn_holds_is_the_very_object_under_saved_tensor_hooks(hooks, holder):
    """Saved for backward (hooks see it, an in-place edit is torch's error), yet the very
    Parameter in grad_fn's closure: a hook unpacks another tensor object. Three calls: the
    general code, then the plans."""
    fn = _holding_w(holder)
    for _ in range(3):
        x = torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=True)
        (g,) = torch.autograd.grad(HOOKS[hooks](fn, x).sum(), w_read, allow_unused=True)
        torch.testing.assert_close(g, torch.cos(x * w_read).detach() * x.detach())


@pytest.mark.parametrize("holder", ["cell", "tuple", "default"])
def test_a_parameter_grad_fn_holds_edited_in_place_after_forward_is_torchs_version_error(holder):
    fn = _holding_w(holder)
    for _ in range(3):
        y = fn(torch.tensor([0.3, -0.5, 1.1], dtype=D, requires_grad=True))
        with torch.no_grad():
            w_read.mul_(2.0)
        try:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        finally:
            with torch.no_grad():
                w_read.div_(2.0)


w_scalar = nn.Parameter(torch.tensor(0.8, dtype=D))


@custom_gradient
def exp_scaled(x, k):
    y = torch.exp(x * w_scalar) * k

    def grad(dy, variables=None):
        d = dy * torch.exp(x * w_scalar) * k
        return (d * w_scalar, None), [(d * x).sum()]

    return y, grad


LAYOUTS = {
    "transposed": lambda base: base.T,
    "strided slice": lambda base: base[:, ::2],
    "expanded row": lambda base: base[:1].expand(4, 6),
    "column of a transpose": lambda base: base.T[1],
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_non_contiguous_and_expanded_inputs_match_plain_autograd(layout):
    base = torch.linspace(-1, 1, 24, dtype=D).reshape(4, 6).requires_grad_()
    found = []
    for fn in (exp_scaled, lambda x, k: torch.exp(x * w_scalar) * k):
        x = LAYOUTS[layout](base)
        found.append(_two_orders(lambda x=x, fn=fn: fn(x, 0.5), (base, w_scalar)))
    torch.testing.assert_close(found[0], found[1])


def _two_orders(call, inputs):
    first = torch.autograd.grad(call().pow(2).sum(), inputs, create_graph=True, allow_unused=True)
    first = [torch.zeros_like(t) if g is None else g for g, t in zip(first, inputs, strict=True)]
    second = torch.autograd.grad(sum(g.sum() for g in first), inputs, allow_unused=True)
    return [*first, *_dense_like(second, inputs)]


def _dense_like(grads, inputs):
    return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, inputs, strict=True)]


@custom_gradient
def square_complex(z):
    def grad(dy):
        return dy * (2 * z).conj()  # torch's convention: the conjugate Wirtinger derivative

    return z * z, grad


def test_complex_input_matches_plain_autograd_to_the_second_order():
    z = torch.tensor([0.3 + 1j, -0.5 + 0.2j], dtype=torch.complex128, requires_grad=True)
    found = []
    for fn in (square_complex, lambda z: z * z):
        for _ in range(3):
            (g,) = torch.autograd.grad(fn(z).abs().pow(2).sum(), z, create_graph=True)
            found.append([g, *torch.autograd.grad(g.real.sum() + g.imag.sum(), z)])
    for got, want in zip(found[:3], found[3:], strict=True):
        torch.testing.assert_close(got, want)


@custom_gradient
def times_counts(x, n):
    def grad(dy):
        return dy * n, None

    return x * n, grad


def test_an_integer_tensor_argument_matches_plain_autograd():
    n = torch.tensor([1, 2, 3])
    for _ in range(3):
        x = torch.linspace(-1, 1, 3, dtype=D).requires_grad_()
        (g,) = torch.autograd.grad(times_counts(x, n).sum(), x, create_graph=True)
        torch.testing.assert_close(g, n.to(D))
        assert not g.requires_grad  # the gradient does not depend on x: no second derivative


# --- refusals that name f -------------------------------------------------------------------


@custom_gradient
def scaled_by(x, *, m):
    def grad(dy):
        return dy * m

    return x * m, grad


def test_a_keyword_tensor_that_needs_a_gradient_is_refused_naming_f():
    x = torch.ones(3, dtype=D, requires_grad=True)
    for m in (torch.full((3,), 2.0, dtype=D, requires_grad=True), w_read * 2):
        with pytest.raises(CustomGradientError, match=r"keyword `m`") as info:
            scaled_by(x, m=m)
        assert where(scaled_by) in str(info.value)


# --- torch.compile ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_compiled_method_matches_plain_autograd(dynamo):
    """Several outputs and a grad_fn with `variables=None`: torch 2.13's Dynamo failed with its
    own AssertionError reading that default (Note [upstreams under compile]). Two calls with
    the same Python int (the index is a constant of the graph: one compilation)."""
    decorated, plain = _pair_of_modules()
    compiled = torch.compile(_direct, backend="aot_eager")
    for seed in (1, 4):
        want = _derivatives(plain, _direct, seed, order=1)
        torch.testing.assert_close(_derivatives(decorated, compiled, seed, order=1), want)


@custom_gradient
def two_without_variables(x):
    def grad(d1, d2, variables=None):  # TensorFlow's habit, where f reads no variable
        return 2 * d1 + 3 * d2

    return (2 * x, 3 * x), grad


@custom_gradient
def two_taking_three(x):
    def grad(d1, d2, d3):
        return 2 * d1 + 3 * d2

    return (2 * x, 3 * x), grad


@pytest.mark.slow
def test_compiled_grad_fns_defined_in_f_are_called_or_refused_by_name(dynamo):
    """Dynamo reads no defaults of a grad_fn defined in f (Note [upstreams under compile]):
    one that takes the upstreams runs, one that cannot is eager's refusal in backward."""
    compiled = torch.compile(lambda x, fn: sum(o.sum() for o in fn(x)), backend="eager")
    x = torch.ones(3, dtype=D, requires_grad=True)
    compiled(x, two_without_variables).backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 5.0, dtype=D))
    with pytest.raises(CustomGradientError, match="missing a required argument: 'd3'") as info:
        compiled(x, two_taking_three).backward()
    assert where(two_taking_three) in str(info.value)
