"""The eager plans (Note [plans] in `_plan.py`): code generated per call shape, learned from a
call of the general code. Every other test file runs through them too (a plan serves a shape's
calls from the second on); these tests pin that each common shape takes one and gives plain
autograd's results, and what the plans must hand to the general code, and that they do."""

import re

import pytest
import torch
from helpers import D, closure_layer, flatten
from messages import (
    count,
    edited_in_place,
    jit_trace,
    meta_gradient,
    variables_count,
    variables_keyword,
)

from tf_compat_grad import (
    CustomGradientNotImplementedError,
    CustomGradientTypeError,
    CustomGradientValueError,
    custom_gradient,
    examples,
)


def planned(y: torch.Tensor) -> bool:
    """Whether the node of `y` is a plan's (its context holds the plan, not a record)."""
    return hasattr(y.grad_fn, "plan")


def leaf(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=D, requires_grad=True)


def grads(y: torch.Tensor, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return torch.autograd.grad(y.sum(), inputs, allow_unused=True)


@custom_gradient
def scaled(*xs):
    """Sum of 2 x_i with gradient 3 upstream per input, for any number of inputs."""
    n = torch.tensor(len(xs))  # a tensor in grad's cell, as plans need

    def grad(dy):
        return (3 * dy,) * int(n) if n > 1 else 3 * dy

    return sum(2 * x for x in xs), grad


def test_each_number_of_arguments_gets_its_own_plan_and_they_chain():
    # Seven numbers of arguments, more than a function gets plans for: each call, in any order,
    # gives its own gradient, planned or not.
    sizes = [1, 2, 3, 1, 4, 5, 6, 2, 7, 3]
    for n in sizes:
        xs = [leaf(3) for _ in range(n)]
        y = scaled(*xs)
        torch.testing.assert_close(y, sum(2 * x for x in xs).detach())
        for g in grads(y, *xs):
            torch.testing.assert_close(g, torch.full((3,), 3.0, dtype=D))
    assert planned(scaled(leaf(3))) and planned(scaled(leaf(3), leaf(3)))
    assert not planned(scaled(*[leaf(3) for _ in range(7)])), "past the cap: the general code"


def test_log1pexp_takes_the_plan_and_keeps_an_exact_second_derivative():
    x = leaf(5)
    examples.log1pexp(x)  # the general code, which makes the plan
    for _ in range(2):
        y = examples.log1pexp(x)
        assert planned(y)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        torch.testing.assert_close(h, torch.sigmoid(x) * (1 - torch.sigmoid(x)))


def closure_shapes():
    """grad_fns the plan must hand to the general code after f ran: name, f."""

    def two_cells_one_tensor(x):
        a = b = x * 2

        def grad(dy):
            return dy * (a + b) / (2 * x.detach())

        return a * 1, grad

    def four_cells(x):
        a, b, c, d = x * 1, x * 2, x * 3, x * 4

        def grad(dy):
            return dy * (a + b + c + d) / (5 * x.detach())

        return x * 2, grad

    def a_number_in_a_cell(x):
        k = 2.0

        def grad(dy):
            return dy * k

        return x * 2, grad

    def no_closure(x):
        return x * 2, _double

    def a_default_tensor(x):
        t = torch.full_like(x, 2.0)

        def grad(dy, t=t):
            return dy * t

        return x * 2, grad

    def a_lambda(x):
        return x * 2, lambda dy: dy * 2

    def tuple_output(x):
        def grad(dy1, dy2):
            return dy1 + dy2

        return (x * 1, x * 1), grad

    def list_pair(x):
        e = x * 2

        def grad(dy):
            return dy * e / x.detach()

        return [e * 1, grad]

    return {
        name: fn for name, fn in locals().items() if callable(fn) and name not in {"closure_shapes"}
    }


def _double(dy):
    return dy * 2


@pytest.mark.parametrize("name", sorted(closure_shapes()))
def test_what_the_plan_does_not_handle_gets_the_general_code_and_f_runs_once(name):
    fn = closure_shapes()[name]
    calls = []

    def f(x):
        calls.append(1)
        return fn(x)

    decorated = custom_gradient(f)
    x = leaf(4)
    for i in range(2):
        out = decorated(x)
        assert len(calls) == i + 1
        total = sum(out) if isinstance(out, tuple) else out
        (g,) = grads(total, x)
        torch.testing.assert_close(g, torch.full((4,), 2.0, dtype=D))


def test_an_empty_cell_is_handed_to_the_general_code():
    @custom_gradient
    def f(x):
        def grad(dy):
            return dy * scale

        if x.sum() > 1e9:  # never: the cell of `scale` stays empty
            scale = 2.0
        return x * 2, grad

    x = leaf(3)
    y = f(x)
    with pytest.raises(NameError):
        y.sum().backward()


def test_gradients_that_are_not_exact_are_repaired_by_the_general_checks():
    @custom_gradient
    def f(x, w):
        def grad(dy):
            # a Python number, a 0-d float32 tensor
            return 1.5, torch.ones((), dtype=torch.float32, device=x.device)

        return x * w, grad

    x, w = leaf(3), leaf(3)
    f(x, w)  # the plan
    y = f(x, w)
    assert planned(y)
    gx, gw = grads(y, x, w)
    assert gx.dtype == D and gw.dtype == D
    torch.testing.assert_close(gx, torch.full((3,), 1.5, dtype=D))
    torch.testing.assert_close(gw, torch.ones(3, dtype=D))


def test_a_gradient_of_the_right_shape_in_another_dtype_is_checked():
    # Same shape, complex for a real input: the general checks refuse it with the library's
    # error (torch's engine would raise its own, naming neither function nor argument).
    @custom_gradient
    def f(x):
        k = torch.tensor(1 + 1j)

        def grad(dy):
            return dy * k

        return x * 2, grad

    f(leaf(3))  # the plan
    y = f(leaf(3))
    assert planned(y)
    with pytest.raises(CustomGradientTypeError, match=r"complex128.*argument `x`"):
        y.sum().backward()


def test_a_list_of_gradients_is_accepted_as_a_tuple_is():
    @custom_gradient
    def f(x, w):
        def grad(dy):
            return [dy * w, dy * x]

        return x * w, grad

    x, w = leaf(3), leaf(3)
    gx, gw = grads(f(x, w), x, w)
    torch.testing.assert_close(gx, w.detach())
    torch.testing.assert_close(gw, x.detach())


def test_a_wrong_number_of_gradients_is_the_general_error():
    @custom_gradient
    def f(x, w):
        def grad(dy):
            return dy * w

        return x * w, grad

    x, w = leaf(3), leaf(3)
    with pytest.raises(ValueError, match=re.escape(count(f, 1, ["x", "w"]))):
        f(x, w).sum().backward()


def test_a_gradient_for_an_input_that_needs_none_is_dropped_when_it_needs_repair():
    @custom_gradient
    def f(x, w):
        def grad(dy):
            return dy * w, "not a gradient"  # for w, which needs no gradient: never read

        return x * w, grad

    x, w = leaf(3), torch.randn(3, dtype=D)
    (gx,) = grads(f(x, w), x)
    torch.testing.assert_close(gx, w)


def test_under_autocast_the_general_code_keeps_the_forward_state_for_grad_fn():
    seen = []

    @custom_gradient
    def f(x):
        def grad(dy):
            seen.append(torch.is_autocast_enabled("cpu"))
            return dy * 2

        return x * 2, grad

    x = leaf(3)
    f(x).sum().backward()  # makes the plan
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = f(x)
    assert not planned(y)
    y.sum().backward()
    assert seen == [False, True]


def test_inputs_that_need_no_gradient_get_no_node():
    @custom_gradient
    def f(x):
        return x * 2, _double

    x = torch.randn(3, dtype=D)
    y = f(x)
    assert y.grad_fn is None and not y.requires_grad


def test_one_tensor_in_two_cells_is_saved_once_by_the_general_code():
    packed = []

    def pack(tensor):
        packed.append(tensor)
        return tensor.clone()

    @custom_gradient
    def product(x, y):
        def grad(dy):
            return dy * y, dy * x

        return x + y, grad

    x = leaf(3)
    product(x, x * 1)  # a plan for two arguments exists
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = product(x, x)
    assert len(packed) == 1 and not planned(y)
    (g,) = grads(y, x)
    torch.testing.assert_close(g, 2 * x.detach())


# --- watched plans: f reads Parameters it is not passed (variables=) --------------------------


def parameters():
    return (
        torch.nn.Parameter(torch.randn(4, 3, dtype=D)),
        torch.nn.Parameter(torch.randn(4, dtype=D)),
    )


def test_a_layer_with_closure_parameters_takes_a_watched_plan():
    w, b = parameters()
    layer = closure_layer(w, b)
    x = leaf(2, 3)
    layer(x)  # the plan
    for _ in range(2):
        y = layer(x)
        assert planned(y) and y.grad_fn.plan[1] == [w, b]  # the variables
        gx, gw, gb = grads(y, x, w, b)
        torch.testing.assert_close(gx, torch.ones(2, 4, dtype=D) @ w.detach())
        torch.testing.assert_close(gw, torch.ones(4, 2, dtype=D) @ x.detach())
        torch.testing.assert_close(gb, torch.full((4,), 2.0, dtype=D))


def test_variables_reach_their_gradients_when_no_input_needs_one():
    w, b = parameters()
    layer = closure_layer(w, b)
    layer(torch.randn(2, 3, dtype=D))  # the plan
    y = layer(torch.randn(2, 3, dtype=D))
    assert planned(y)
    y.sum().backward()
    torch.testing.assert_close(b.grad, torch.full((4,), 2.0, dtype=D))


def test_a_parameter_passed_as_an_argument_is_not_a_variable():
    w, b = parameters()

    @custom_gradient
    def f(x, v):
        def grad(dy, variables=None):
            return (dy @ w, dy.sum(0)), [dy.t() @ x]

        return torch.nn.functional.linear(x, w, v), grad  # w from the closure, v passed

    x = leaf(2, 3)
    f(x, b)  # the plan
    y = f(x, b)
    assert planned(y) and y.grad_fn.plan[1] == [w]
    _, gb, gw = grads(y, x, b, w)
    torch.testing.assert_close(gb, torch.full((4,), 2.0, dtype=D))
    torch.testing.assert_close(gw, torch.ones(4, 2, dtype=D) @ x.detach())


def test_a_parameter_read_on_some_calls_only():
    w, _ = parameters()

    @custom_gradient
    def f(x):
        use = bool(x.sum() > 0)
        out = x @ w.t() if use else x.sum(-1, keepdim=True).expand(-1, 4) * 1

        def grad(dy, variables=None):
            if variables:
                return dy @ w, [dy.t() @ x]
            return dy.sum(-1, keepdim=True).expand(-1, 3) * 1

        return out, grad

    for sign in (1.0, -1.0, 1.0):
        x = (sign * torch.rand(2, 3, dtype=D)).requires_grad_()
        y = f(x)
        (gx,) = grads(y, x)
        expected = torch.ones(2, 4, dtype=D) @ w.detach() if sign > 0 else torch.full_like(x, 4.0)
        torch.testing.assert_close(gx, expected)


def test_variable_gradients_as_a_tuple_or_to_repair_take_the_general_checks():
    w, b = parameters()

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            # a tuple instead of a list, and float32 and a number for float64 Parameters
            return dy @ w, (torch.ones(4, 3, dtype=torch.float32), 2)

        return torch.nn.functional.linear(x, w, b), grad

    x = leaf(2, 3)
    _, gw, gb = grads(f(x), x, w, b)
    assert gw.dtype == D and gb.dtype == D
    torch.testing.assert_close(gw, torch.ones(4, 3, dtype=D))
    torch.testing.assert_close(gb, torch.full((4,), 2.0, dtype=D))


def test_a_list_of_variable_gradients_that_need_repair_takes_the_general_checks():
    w, b = parameters()

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            # a list, as grad_fns return it, of a float32 gradient for a float64 Parameter and
            # a 0-d one for a Parameter of shape [4]: compared with the Parameters
            return dy @ w, [torch.ones(4, 3, dtype=torch.float32), torch.ones((), dtype=D)]

        return torch.nn.functional.linear(x, w, b), grad

    x = leaf(2, 3)
    f(x)  # the plan
    y = f(x)
    assert planned(y)
    _, gw, gb = grads(y, x, w, b)
    assert gw.dtype == D and gb.dtype == D
    torch.testing.assert_close(gw, torch.ones(4, 3, dtype=D))
    torch.testing.assert_close(gb, torch.ones(4, dtype=D))


def test_a_wrong_number_of_variable_gradients_is_the_general_error():
    w, b = parameters()

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            return dy @ w, [dy.t() @ x]  # one for two variables

        return torch.nn.functional.linear(x, w, b), grad

    f(leaf(2, 3))  # the plan
    y = f(leaf(2, 3))
    assert planned(y)
    with pytest.raises(ValueError, match=re.escape(variables_count(f, [[4, 3], [4]], 1))):
        y.sum().backward()


def test_input_and_variable_gradients_that_sum_to_the_right_count_are_still_checked():
    w, b = parameters()

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            # two input gradients for one input and one for two variables: three in all, each
            # of the shape of the input or variable at its place when counted together
            return (dy @ w, dy.t() @ x), [dy.sum(0)]

        return torch.nn.functional.linear(x, w, b), grad

    with pytest.raises(ValueError, match=re.escape(variables_count(f, [[4, 3], [4]], 1))):
        f(leaf(2, 3)).sum().backward()


def test_each_grad_fn_is_checked_for_variables_even_after_one_that_takes_them():
    w, _ = parameters()

    @custom_gradient
    def f(x, keyword):
        def takes(dy, variables=None):
            return (dy @ w, None), [dy.t() @ x]

        def does_not(dy):
            return dy @ w, None

        return x @ w.t(), takes if keyword.item() else does_not

    x = leaf(2, 3)
    f(x, torch.tensor(1))  # the plan
    y = f(x, torch.tensor(1))
    assert planned(y)
    with pytest.raises(TypeError, match=re.escape(variables_keyword(f, 1, "`w`"))):
        f(x, torch.tensor(0))


# --- call shapes: each takes a plan from its second call, and gives plain autograd's results ---


def _outputs(out):
    """The tensors of a structure of outputs, in flattening order (sorted dict keys)."""
    return flatten(out)


@custom_gradient
def clipped(x, clip):
    def grad(dy):
        return dy * ((x > 0) & (x < clip)).to(dy.dtype), None

    return x.clamp(min=0, max=clip), grad


@custom_gradient
def by_keyword(x, scale=1.0, name="unused"):
    def grad(dy):
        return dy * scale

    return x * scale, grad


@custom_gradient
def several(a, b):
    def grad(dp, ds, dd):
        return dp * b + ds + dd, dp * a + ds - dd

    return {"p": a * b, "q": (a + b, a - b)}, grad


@custom_gradient
def as_list(a, b):
    def grad(du, dv):
        return du * b + dv, du * a + dv

    return [a * b, a + b], grad


@custom_gradient
def nested_inputs(pair, weights):
    x, y = pair
    u, v = weights["u"], weights["v"]

    def grad(dz):
        return ([dz * u, dz * v], {"u": dz * x, "v": dz * y})

    return x * u + y * v, grad


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(3, dtype=D) + 0.5)
        self.shift = 0.25

    @custom_gradient
    def forward(self, x):
        def grad(dy, variables=None):
            return dy * self.weight, [(dy * x).sum(0)]

        return x * self.weight + self.shift, grad


SHAPES = {
    "a float argument": (clipped, lambda: (leaf(2, 3), 0.5), {}, lambda x, c: x.clamp(0, c)),
    "keyword numbers": (
        by_keyword,
        lambda: (leaf(2, 3),),
        {"scale": 1.5, "name": "s"},
        lambda x, scale, name: x * scale,
    ),
    "nested dict and tuple outputs": (
        several,
        lambda: (leaf(3), leaf(3)),
        {},
        lambda a, b: {"p": a * b, "q": (a + b, a - b)},
    ),
    "list outputs": (as_list, lambda: (leaf(3), leaf(3)), {}, lambda a, b: [a * b, a + b]),
    "nested inputs": (
        nested_inputs,
        lambda: ((leaf(3), leaf(3)), {"v": leaf(3), "u": leaf(3)}),
        {},
        lambda pair, w: pair[0] * w["u"] + pair[1] * w["v"],
    ),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_each_call_shape_takes_a_plan_and_matches_plain_autograd(name):
    fn, make_args, kwargs, reference = SHAPES[name]
    for call in range(3):
        args = make_args()
        out = fn(*args, **kwargs)
        expected = reference(*args, **kwargs)
        assert type(out) is type(expected)
        if isinstance(out, dict):
            assert list(out) == list(expected)
        outs, wanted = _outputs(out), _outputs(expected)
        assert all(planned(o) for o in outs) == (call > 0), "the plan serves the second call on"
        leaves = [t for t in flatten(args) if isinstance(t, torch.Tensor)]
        ups = [torch.randn_like(o) for o in outs]
        got = torch.autograd.grad(outs, leaves, ups)
        want = torch.autograd.grad(wanted, leaves, ups)
        for g, w in zip((*outs, *got), (*wanted, *want), strict=True):
            torch.testing.assert_close(g, w)


def test_a_method_reading_its_module_parameter_takes_a_watched_plan():
    module = Scale()
    for call in range(3):
        x = leaf(2, 3)
        y = module(x)
        assert planned(y) == (call > 0)
        if call:
            assert y.grad_fn.plan[1] == [module.weight]
        gx, gw = grads(y, x, module.weight)
        torch.testing.assert_close(y, (x * module.weight + 0.25).detach())
        torch.testing.assert_close(gx, module.weight.detach().expand(2, 3))
        torch.testing.assert_close(gw, x.detach().sum(0))


class Shift(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = 3.0

    @custom_gradient
    def forward(self, x):
        def grad(dy):
            return dy * self.factor  # `self` in grad's cell: shared as it is

        return x * self.factor, grad


def test_a_method_that_reads_no_parameter_takes_a_plan_without_variables():
    module = Shift()
    for call in range(3):
        x = leaf(2, 3)
        y = module(x)
        assert planned(y) == (call > 0)
        if call:
            assert y.grad_fn.plan[1] == []
        (gx,) = grads(y, x)
        torch.testing.assert_close(gx, torch.full((2, 3), 3.0, dtype=D))
    with torch.no_grad():
        assert not module(leaf(2)).requires_grad
    assert module(torch.ones(2, dtype=D)).grad_fn is None, "no input needs a gradient: no node"


def test_without_grad_a_plan_returns_outputs_that_need_no_gradient():
    a, b = leaf(3), leaf(3)
    several(a, b)  # the plan
    with torch.no_grad():
        out = several(a, b)
    assert list(out) == ["p", "q"] and not any(t.requires_grad for t in _outputs(out))
    torch.testing.assert_close(out["q"][1], a.detach() - b.detach())


def test_another_call_shape_or_mode_takes_the_general_code_with_the_same_results():
    x = leaf(3)
    clipped(x, 0.5)  # a plan for (tensor, number)
    changed = {
        "a tensor where a number was": lambda: clipped(x, torch.tensor(0.5, dtype=D)),
        "autocast": lambda: _autocast(lambda: clipped(x, 0.5)),
        "dual level": lambda: _in_dual_level(lambda: clipped(x, 0.5)),
    }
    for name, call in changed.items():
        y = call()
        assert not planned(y), name
        (g,) = grads(y, x)
        torch.testing.assert_close(g, ((x > 0) & (x < 0.5)).to(D), msg=name)


def _autocast(call):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return call()


def _in_dual_level(call):
    with torch.autograd.forward_ad.dual_level():
        return call()


def test_outputs_of_another_structure_take_the_general_code():
    @custom_gradient
    def f(x, as_pair):
        def grad(*dys):
            return sum(dys) * 2, None

        return ((x * 2, x * 2) if as_pair else x * 2), grad

    x = leaf(3)
    f(x, 1)  # the plan: a pair of outputs
    for as_pair in (1, 0, 1):
        out = f(x, as_pair)
        outs = list(out) if as_pair else [out]
        assert all(planned(o) for o in outs) == bool(as_pair)
        (g,) = torch.autograd.grad(outs, x, [torch.ones(3, dtype=D)] * len(outs))
        torch.testing.assert_close(g, torch.full((3,), 2.0 * len(outs), dtype=D))


@custom_gradient
def passes_or_views(x, which):
    """x itself, a view of it, or a new tensor (`which`: 0, 1, 2), with gradient 3 upstream."""
    y = (x, x[:2], x * 1.0)[which]

    def grad(dy):
        return (3 * dy if which != 1 else torch.cat([3 * dy, torch.zeros_like(x[2:])]), None)

    return y, grad


@pytest.mark.parametrize("which", [0, 1, 2], ids=["the input", "a view of it", "a new tensor"])
def test_a_planned_output_that_aliases_its_input_is_a_copy(which):
    # From the second call on a plan serves the shape: its output must be a copy of the input
    # too (Note [outputs that alias an input]), so that an edit of it leaves x as it was.
    x = leaf(3)
    for _ in range(3):
        y = passes_or_views(x, which)
        y.mul_(2)
        (y.sum() + (x * x).sum()).backward()
        expected = 2 * x.detach()
        expected[: 2 if which == 1 else 3] += 6
        assert torch.equal(x.grad, expected)
        x.grad = None
    assert planned(passes_or_views(x, 2))  # the shape has its plan


@custom_gradient
def edits(x, y, edit):
    """x * y, editing x in place when `edit`: refused whichever path serves the call."""
    out = x * y
    if edit:
        x.mul_(1.0)

    def grad(dy):
        return dy * y, dy * x, None

    return out, grad


def test_an_argument_edited_in_place_is_refused_by_the_plan_too():
    x, y = leaf(3), leaf(3)
    a, b = x * 1, y * 1  # not leaves: torch lets f edit them
    edits(a, b, False)  # the general code, which makes the plan for this shape
    assert planned(edits(a, b, False))
    for _ in range(2):
        with pytest.raises(CustomGradientValueError) as refused:
            edits(a, b, True)
        assert str(refused.value) == edited_in_place(edits, "x")


def test_a_renamed_grad_fn_is_made_again_under_its_name_by_the_plan_too():
    """grad_fn is made again for backward by one rule (`_closure.rebuild_source`) in the
    general code and in a plan: a grad_fn renamed with `functools.wraps` keeps that name in
    both, as the TypeError of a wrong call shows."""
    import functools

    def template(dy):
        raise NotImplementedError

    @custom_gradient
    def f(x):
        e = torch.exp(x)

        @functools.wraps(template)
        def grad(dy, missing):
            return dy * e

        return x * 2, grad

    x = leaf(3)
    messages = []
    for _ in range(2):  # the general code, then the plan
        y = f(x)
        with pytest.raises(TypeError) as error:
            y.sum().backward()
        messages.append(str(error.value))
    assert planned(y)
    assert messages[0] == messages[1] and "template()" in messages[0]


def test_a_gradient_on_another_device_than_its_input_is_checked_by_the_plan():
    """The plans note a CPU input's device as True (Note [exact gradients]): a gradient on the
    CPU for a meta input is moved, and one on the meta device for a CPU input is refused, as
    the general code does."""

    @custom_gradient
    def f(x):
        def grad(dy):
            return torch.ones(x.shape, dtype=D, device=other[0])

        return x * 2, grad

    other = ["cpu"]
    m = leaf(2, 3).to("meta").detach().requires_grad_()
    f(m)  # the plan
    y = f(m)
    assert planned(y)
    (gm,) = grads(y, m)
    assert gm.device.type == "meta" and gm.shape == (2, 3)
    other[0] = "meta"
    (gm,) = grads(f(m), m)  # a meta gradient for a meta input: passed on as it is
    assert gm.device.type == "meta"
    x = leaf(3)
    f(x)  # the plan of a CPU input
    y = f(x)
    assert planned(y)
    with pytest.raises(CustomGradientTypeError) as refused:
        y.sum().backward()
    assert str(refused.value) == meta_gradient(f, "argument `x`", "cpu")


@pytest.mark.filterwarnings("ignore:`torch.jit.trace(_method)?` is deprecated")
def test_a_planned_function_under_jit_trace_is_refused_as_the_general_code_refuses_it():
    @custom_gradient
    def f(x):
        return x * 2, lambda dy: dy * 3

    x = leaf(3)
    f(x)  # the plan
    assert planned(f(x))
    with pytest.raises(CustomGradientNotImplementedError) as refused:
        torch.jit.trace(f, (x,))
    assert str(refused.value) == jit_trace(f)


def test_the_unrolled_variable_gradient_test_takes_only_exact_gradients():
    from tf_compat_grad._plan_node import _exact_all

    meta = torch.nn.Parameter(torch.empty(2, device="meta"))  # a device other than the CPU
    variables = [
        torch.nn.Parameter(torch.zeros(4, 3, dtype=D)),
        torch.nn.Parameter(torch.zeros(4)),
        meta,
    ]
    exact = [torch.ones(4, 3, dtype=D), torch.ones(4), torch.ones(2, device="meta")]
    for n in (1, 2, 3):
        assert _exact_all[n](exact[:n], variables[:n])
        assert not _exact_all[n](exact[: n - 1], variables[:n])  # one too few
        assert not _exact_all[n]([*exact[:n], exact[0]], variables[:n])  # one too many
    wrong = {
        0: [
            torch.ones(4, 3),
            torch.ones(3, 4, dtype=D),
            torch.nn.Parameter(torch.ones(4, 3, dtype=D)),
            1.0,
        ],
        1: [torch.ones(4, dtype=D), torch.ones(1, 4), torch.ones(())],
        2: [torch.ones(2), torch.ones(2, 1, device="meta")],  # the CPU for a meta Parameter
    }
    for i, grads in wrong.items():
        for g in grads:
            assert not _exact_all[3]([g if j == i else e for j, e in enumerate(exact)], variables)
    cpu = [torch.nn.Parameter(torch.zeros(2))]
    assert not _exact_all[1]([torch.ones(2, device="meta")], cpu)  # meta for a CPU Parameter


def _switching():
    """A decorated function whose f returns one tensor, or a list of two while `state["list"]`
    is set: the same input shape, two output structures."""
    state = {"list": False}

    @custom_gradient
    def f(x):
        y = torch.sin(x)
        if state["list"]:
            return [y, 2 * y], lambda dy, dz: (dy + 2 * dz) * torch.cos(x)
        return y, lambda dy: dy * torch.cos(x)

    return f, state


def test_a_planned_function_whose_f_returns_another_structure_without_grad():
    """The no-grad branch of a plan hands what it does not handle to the general code's
    outputs (`EagerPath._fresh`): values as f made them, nothing recorded."""
    f, state = _switching()
    x = leaf(3)
    f(x)
    assert planned(f(x))  # planned with one tensor out, from the second call
    state["list"] = True
    with torch.no_grad():
        out = f(x)
    assert type(out) is list and len(out) == 2
    torch.testing.assert_close(out[0], torch.sin(x).detach())
    torch.testing.assert_close(out[1], 2 * torch.sin(x).detach())
    assert not any(t.requires_grad for t in out)
    assert all(t.grad_fn is None for t in out)


def test_alternating_output_structures_for_one_input_shape_keep_each_gradient():
    """A call the plan of its input shape hands on (another output structure) is learned again
    under the same key, which is planned already: the general code serves it, every time, with
    grad_fn's gradients (`EagerPath._plan`'s first test)."""
    f, state = _switching()
    x = leaf(3)
    for step in range(6):
        state["list"] = bool(step % 2)
        out = f(x)
        y = out[0] + out[1] if state["list"] else out
        (g,) = grads(y, x)
        want = (3 if state["list"] else 1) * torch.cos(x)
        torch.testing.assert_close(g, want.detach())


def test_a_decoration_again_first_called_without_grad_plans_each_shape_once():
    """A function decorated again (inside `forward`) starts on the shapes its code learned
    (Note [decorated again]); called first under `no_grad`, where f may read a Parameter, it
    plans that call's shape itself, and when a call of another shape then reaches the general
    code, the shared shape of the same key is skipped: one plan per shape, each call with
    grad_fn's gradients for the input and the Parameter."""
    w = torch.nn.Parameter(torch.tensor([0.5, -1.5, 2.0], dtype=D))

    def layer(x, scale=1.0):
        y = torch.sin(x * w) * scale

        def grad(dy, variables=None):
            c = dy * scale * torch.cos(x * w)
            return c * w, [c * x]

        return y, grad

    x = leaf(3)
    custom_gradient(layer)(x).sum().backward()  # the code learns the shape
    again = custom_gradient(layer)
    with torch.no_grad():
        torch.testing.assert_close(again(x), torch.sin(x * w))
    for scale in (2.0, 1.0, 2.0, 1.0):
        w.grad = None
        y = again(x, scale=scale) if scale != 1.0 else again(x)
        (gx,) = torch.autograd.grad(y.sum(), x, retain_graph=True)
        y.sum().backward()
        torch.testing.assert_close(gx, (scale * torch.cos(x * w) * w).detach())
        torch.testing.assert_close(w.grad, (scale * torch.cos(x * w) * x).detach())
    assert planned(again(x)) and planned(again(x, scale=2.0))
