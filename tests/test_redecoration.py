"""Decorating the same code again, as a `forward` that defines its custom gradient does on every
call: what is made once per code object (the reach proof's reading of the code, the
`torch.func` node class) serves each decoration with that decoration's own closure, and keeps
no earlier decoration alive."""

import gc
import types
import weakref

import pytest
import torch
from helpers import (
    D,
    closure_layer,
    cyclic_garbage_of,
    flatten,
    reach_of,
    saved_while_called,
)
from torch import nn

from tf_compat_grad import (
    CustomGradientValueError,
    _decoration,
    _eager,
    _reach,
    _reach_check,
    _record,
    _unrecorded,
    custom_gradient,
)


def scaled_by(scale):
    """A new decoration of the same code, closing over `scale` (a number, a tensor or a
    Parameter): the gradient is 5 * scale, not autodiff's."""

    @custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return 5 * dy * scale, [7 * (dy * x).sum() for _ in variables or ()]

        return x * scale, grad

    return scaled


def test_each_decoration_of_one_code_follows_its_own_closure_under_torch_func():
    x = torch.linspace(-1, 1, 3, dtype=D)
    for scale in (2.0, 3.0, 2.0):
        f = scaled_by(torch.tensor(scale, dtype=D))
        grad = torch.func.grad(lambda t, f=f: f(t).sum())(x)
        torch.testing.assert_close(grad, torch.full((3,), 5 * scale, dtype=D))


def test_each_decoration_of_one_code_finds_its_own_parameters():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    weight = nn.Parameter(torch.tensor(2.0, dtype=D))
    for scale in (weight, torch.tensor(2.0, dtype=D), weight):
        weight.grad = None
        scaled_by(scale)(x).sum().backward()
        torch.testing.assert_close(x.grad, torch.full((3,), 10.0, dtype=D))
        x.grad = None
        if scale is weight:
            torch.testing.assert_close(weight.grad, 7 * x.detach().sum())
        else:
            assert weight.grad is None


def _func_grad(f, x):
    return torch.func.grad(lambda t: f(t).sum())(x)


def test_a_decoration_is_not_kept_alive_by_the_next_one():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    first = scaled_by(2.0)
    _func_grad(first, x.detach())  # makes the torch.func node class
    first(x).sum().backward()
    gone = weakref.ref(first.__wrapped__)
    del first
    second = scaled_by(3.0)
    torch.testing.assert_close(_func_grad(second, x.detach()), torch.full((3,), 15.0, dtype=D))
    gc.collect()
    assert gone() is None


def exp_scaled_by(scale):
    """`scale * exp(x)` with its true gradient, decorated anew per call; `scale` a tensor or a
    Parameter, whose gradient grad_fn then gives."""

    @custom_gradient
    def exp_scaled(x):
        e = torch.exp(x)

        def grad(dy, variables=None):
            if variables is None:
                return dy * scale * e
            return dy * scale * e, [(dy * e).sum()]

        return scale * e, grad

    return exp_scaled


def test_a_new_decoration_starts_on_the_plan_and_node_an_earlier_one_learned():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    first = exp_scaled_by(torch.tensor(2.0, dtype=D))
    first(x)  # the general code: learns the plan
    node = type(first(x).grad_fn)
    for scale in (3.0, 4.0):
        y = exp_scaled_by(torch.tensor(scale, dtype=D))(x)  # its first call
        assert hasattr(y.grad_fn, "plan") and type(y.grad_fn) is node
        (gx,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(gx, scale * torch.exp(x.detach()))


def test_interleaved_decorations_of_one_code_match_plain_autograd():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    w1, w2 = nn.Parameter(torch.tensor(2.0, dtype=D)), nn.Parameter(torch.tensor(3.0, dtype=D))
    plain = torch.tensor(5.0, dtype=D)
    decorations = [exp_scaled_by(s) for s in (plain, w1, w2)]
    for _ in range(3):
        for f, scale in zip([*decorations, exp_scaled_by(w2)], (plain, w1, w2, w2), strict=True):
            y = f(x)
            sources = (x, scale) if isinstance(scale, nn.Parameter) else (x,)
            got = torch.autograd.grad(y.sum(), sources)
            expected = torch.autograd.grad((scale * torch.exp(x)).sum(), sources)
            torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("scale", ["tensor", "Parameter"])
def test_a_decoration_goes_as_it_goes_out_of_use_leaving_no_reference_cycle(scale):
    """Nothing a decoration makes refers back to it: with the cyclic garbage collector off, the
    function, its wrapper and what it decorated go as soon as the last name of the function goes,
    after calls under grad (on a plan) and without grad, and a loop of decorations leaves
    nothing for the collector to find."""
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)

    def decorate():
        s = torch.tensor(2.0, dtype=D)
        return exp_scaled_by(nn.Parameter(s) if scale == "Parameter" else s)

    for _ in range(2):  # the shape learned, the proof kept
        decorate()(x).sum().backward()
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            f = decorate()
            gone = [weakref.ref(f), weakref.ref(f.__tf_compat_grad__()), weakref.ref(f.__wrapped__)]
            f(x).sum().backward()
            with torch.no_grad():
                f(x)
            del f
            assert [ref() for ref in gone] == [None] * len(gone)
        assert cyclic_garbage_of(__name__) == []
    finally:
        gc.enable()


def test_a_plan_learned_without_parameters_serves_a_decoration_that_reads_one():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for _ in range(2):
        exp_scaled_by(torch.tensor(2.0, dtype=D))(x)  # a plan that reads no Parameter
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    for _ in range(2):
        y = exp_scaled_by(w)(x)
        gx, gw = torch.autograd.grad(y.sum(), (x, w))
        torch.testing.assert_close(gx, 3.0 * torch.exp(x.detach()))
        torch.testing.assert_close(gw, torch.exp(x.detach()).sum())


def reading_by(scale):
    @custom_gradient
    def scaled_without_variables(x):
        def grad(dy):
            return dy * scale

        return x * scale, grad

    return scaled_without_variables


def test_a_new_decoration_without_grad_starts_on_the_plan_when_it_reads_no_parameter(
    monkeypatch,
):
    """Its proof says f reads no Parameter: no `variables` to check (item 33), so no watch."""
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    exp_scaled_by(torch.tensor(2.0, dtype=D))(x)  # the general code: learns the plan
    watched = []
    monkeypatch.setattr(_eager, "run_watched", lambda *args, **kwargs: watched.append(args))
    for scale in (3.0, 4.0):
        with torch.no_grad():
            y = exp_scaled_by(torch.tensor(scale, dtype=D))(x)
        assert not y.requires_grad
        torch.testing.assert_close(y, scale * torch.exp(x.detach()))
    assert watched == []


def test_a_new_decoration_without_grad_is_checked_for_variables():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for _ in range(2):
        reading_by(2.0)(x)  # the plan of a decoration that reads no Parameter
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    with torch.no_grad(), pytest.raises(TypeError, match="variables"):
        reading_by(w)(x)
    with pytest.raises(TypeError, match="variables"):
        reading_by(w)(x)


def test_a_new_decoration_first_called_without_grad_is_checked_as_its_cells_are_then():
    """Item 33 at the first call, not as of the decoration: a cell rebound to a Parameter
    between the two (the proof said no Parameter as it was decorated) is still checked."""
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)

    def make():
        scale = torch.tensor(2.0, dtype=D)

        @custom_gradient
        def scaled_rebindable(x):
            def grad(dy):
                return dy * scale

            return x * scale, grad

        def rebind(value):
            nonlocal scale
            scale = value

        return scaled_rebindable, rebind

    for _ in range(2):
        f, _ = make()
        f(x)  # learns the plan of a decoration that reads no Parameter
    f, rebind = make()
    rebind(nn.Parameter(torch.tensor(3.0, dtype=D)))
    with torch.no_grad(), pytest.raises(TypeError, match="variables"):
        f(x)


def test_planned_decorations_are_not_kept_alive():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    gone = []
    for scale in (2.0, 3.0, 4.0):
        w = nn.Parameter(torch.tensor(scale, dtype=D))
        f = exp_scaled_by(w)
        for _ in range(2):
            f(x).sum().backward()
        gone += [weakref.ref(f.__wrapped__), weakref.ref(w)]
    del f, w
    gc.collect()
    assert [ref() for ref in gone] == [None] * len(gone)


def test_what_is_made_per_code_goes_with_its_code():
    """Nothing made per code object keeps the code alive (the reach proof's reading and its kept
    answer, bounded caches, hold it until evicted: cleared here), and its entry goes with it."""
    namespace: dict = {"custom_gradient": custom_gradient, "torch": torch}
    exec(
        "def make():\n"
        "    @custom_gradient\n"
        "    def doubled(x):\n"
        "        return 2 * x, lambda dy: 3 * dy\n"
        "    return doubled\n",
        namespace,
    )
    x = torch.ones(2, dtype=D, requires_grad=True)
    for _ in range(3):
        (gx,) = torch.autograd.grad(namespace["make"]()(x).sum(), x)
        torch.testing.assert_close(gx, torch.full((2,), 3.0, dtype=D))
    inner = namespace["make"]().__wrapped__.__code__
    (entry,) = [key for key in _record._PER_CODE if key() is inner]  # a weak reference
    del namespace, inner
    _reach._read.cache_clear()
    _unrecorded._global_names.cache_clear()
    _reach_check.PROOFS.clear()
    gc.collect()
    assert entry() is None
    assert entry not in _record._PER_CODE


def test_a_decoration_finds_its_codes_decoration_by_code_and_names():
    """The `Decoration` of the last code asked for is found by identity (a function decorated in
    forward), and only for that code object and f's name, module and qualified name: another
    qualified name (the description messages name) or a code equal in value gets its own entry."""
    plain = scaled_by(1.0).__wrapped__
    code = plain.__code__

    def function_of(code, qualname=plain.__qualname__):
        g = types.FunctionType(code, plain.__globals__, plain.__name__, None, plain.__closure__)
        g.__qualname__ = qualname
        return g

    first = _decoration.decoration_of(function_of(code))
    assert _decoration.decoration_of(function_of(code)) is first
    other = _decoration.decoration_of(function_of(code, "renamed"))
    assert other is not first and "renamed" in other.described
    assert _decoration.decoration_of(function_of(code)) is first  # back to the first names
    copied = code.replace()  # a code object equal in value: `per_code` shares its entry
    assert copied is not code and copied == code
    assert _decoration.decoration_of(function_of(copied)) is first
    assert (
        "renamed" not in custom_gradient(function_of(copied)).__tf_compat_grad__()._shared.described
    )


def test_what_a_code_keeps_holds_nothing_of_a_decorated_function():
    """What the decorations of one code share (`Decoration`, its attributes' template) keeps no
    value of one decoration's f: its annotations and docstring go with it."""

    class Annotation:
        pass

    def make(annotation):
        def f(x: annotation):  # type: ignore[valid-type]
            """One decoration's docstring."""
            return x * 2, lambda dy: dy * 2

        return f

    x = torch.ones(3, dtype=D, requires_grad=True)
    annotation = Annotation()
    held = weakref.ref(annotation)
    decorated = custom_gradient(make(annotation))  # the first: the code's Decoration is made
    decorated(x).sum().backward()
    assert decorated.__annotations__ == {"x": annotation}
    del decorated, annotation
    gc.collect()
    assert held() is None
    again = custom_gradient(make(Annotation()))  # the code's Decoration is still there
    assert again.__tf_compat_grad__()._shared is _decoration.decoration_of(make(None))


# --- the reach proof kept per code (Note [a proof per code] in `_reach_check.py`) -----------


def _analyses(monkeypatch):
    """The functions the reach proof analyses from now on."""
    analysed = []
    prove = _reach.prove
    monkeypatch.setattr(_reach, "prove", lambda f: analysed.append(f) or prove(f))
    return analysed


def _grads(f, x, parameter=None):
    sources = (x,) if parameter is None else (x, parameter)
    return torch.autograd.grad(f(x).sum(), sources)


def test_a_new_decoration_takes_the_kept_proof_without_analysing(monkeypatch):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    exp_scaled_by(torch.tensor(2.0, dtype=D))(x)  # analysed: reads no Parameter
    analysed = _analyses(monkeypatch)
    for scale in (3.0, 4.0):
        f = exp_scaled_by(torch.tensor(scale, dtype=D))
        assert reach_of(f).reads_none()  # before its first call
        (gx,) = _grads(f, x)
        torch.testing.assert_close(gx, scale * torch.exp(x.detach()))
    assert analysed == []


def test_a_cell_that_now_holds_a_parameter_is_proved_anew(monkeypatch):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    exp_scaled_by(torch.tensor(2.0, dtype=D))(x)
    analysed = _analyses(monkeypatch)
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    f = exp_scaled_by(w)
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, torch.exp(x.detach()).sum())
    assert analysed == [f.__wrapped__]
    assert reach_of(exp_scaled_by(nn.Parameter(torch.tensor(5.0, dtype=D)))).reads_own()
    assert not reach_of(exp_scaled_by(torch.tensor(5.0, dtype=D))).reads_own()


def test_a_cell_rebound_after_its_decoration_took_the_kept_proof_is_noticed():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    exp_scaled_by(torch.tensor(2.0, dtype=D))(x)

    def make():
        scale = torch.tensor(2.0, dtype=D)

        @custom_gradient
        def exp_scaled(x):  # the code of `exp_scaled_by`'s, closing over a cell it can rebind
            e = torch.exp(x)
            return (
                scale * e,
                lambda dy, variables=None: (
                    dy * scale * e if variables is None else (dy * scale * e, [(dy * e).sum()])
                ),
            )

        def rebind(value):
            nonlocal scale
            scale = value

        return exp_scaled, rebind

    for _ in range(2):
        f, rebind = make()
        f(x)
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    rebind(w)
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, torch.exp(x.detach()).sum())


GLOBAL_SCALE = torch.tensor(2.0, dtype=D)


def global_scaled():
    @custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return 5 * dy * GLOBAL_SCALE, [7 * (dy * x).sum() for _ in variables or ()]

        return x * GLOBAL_SCALE, grad

    return scaled


def test_a_global_rebound_between_decorations_is_noticed(monkeypatch):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    global_scaled()(x)  # reads no Parameter
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    monkeypatch.setitem(globals(), "GLOBAL_SCALE", w)
    f = global_scaled()
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, 7 * x.detach().sum())


def test_a_user_module_attribute_rebound_between_decorations_is_noticed():
    weights = types.ModuleType("user_weights")
    weights.scale = torch.tensor(2.0, dtype=D)
    namespace = {"custom_gradient": custom_gradient, "weights": weights}
    exec(
        "def make():\n"
        "    @custom_gradient\n"
        "    def scaled(x):\n"
        "        def grad(dy, variables=None):\n"
        "            return 5 * dy, [7 * (dy * x).sum() for _ in variables or ()]\n"
        "        return x * weights.scale, grad\n"
        "    return scaled\n",
        namespace,
    )
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    namespace["make"]()(x)
    weights.scale = nn.Parameter(torch.tensor(3.0, dtype=D))
    f = namespace["make"]()
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, weights.scale)
    torch.testing.assert_close(gw, 7 * x.detach().sum())


def test_the_same_code_in_other_globals_is_proved_there():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    global_scaled()(x)
    code = global_scaled().__wrapped__.__code__
    w = nn.Parameter(torch.tensor(3.0, dtype=D))
    other = {**globals(), "GLOBAL_SCALE": w}
    f = custom_gradient(types.FunctionType(code, other, "scaled"))
    assert not reach_of(f).reads_none()


class _Scaled(nn.Module):
    """A module whose `forward` decorates its custom gradient on every call, closing over
    `self`: the proof stops at `self`, and every call is watched."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor(2.0, dtype=D))

    def forward(self, x):
        @custom_gradient
        def scaled(x):
            def grad(dy, variables=None):
                return 5 * dy * self.weight, [7 * (dy * x).sum() for _ in variables or ()]

            return x * self.weight, grad

        return scaled(x)


def test_a_module_whose_parameter_changes_between_decorations_gives_its_gradient():
    module = _Scaled()
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for value in (2.0, 3.0):
        module.weight = nn.Parameter(torch.tensor(value, dtype=D))
        gx, gw = _grads(module, x, module.weight)
        torch.testing.assert_close(gx, torch.full((3,), 5 * value, dtype=D))
        torch.testing.assert_close(gw, 7 * x.detach().sum())


def nested_scaled_by(scale):
    """A helper defined anew with each decoration, closing over `scale`: what the proof reads
    through it is this decoration's, so the proof is not kept."""

    def helper(x):
        return x * scale

    @custom_gradient
    def scaled(x):
        def grad(dy, variables=None):
            return 5 * dy * scale, [7 * (dy * x).sum() for _ in variables or ()]

        return helper(x), grad

    return scaled


def test_a_nested_helper_is_read_for_each_decoration():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    for _ in range(2):
        for scale in (torch.tensor(2.0, dtype=D), nn.Parameter(torch.tensor(2.0, dtype=D))):
            f = nested_scaled_by(scale)
            if isinstance(scale, nn.Parameter):
                assert reach_of(f).possible(())
                _, gw = _grads(f, x, scale)
                torch.testing.assert_close(gw, 7 * x.detach().sum())
            else:
                assert not reach_of(f).possible(())
                _grads(f, x)
                assert reach_of(f).reads_none()


def test_a_default_is_read_for_each_decoration():
    def make(scale):
        @custom_gradient
        def scaled(x, scale=scale):
            def grad(dy, variables=None):
                return 5 * dy * scale, [7 * (dy * x).sum() for _ in variables or ()]

            return x * scale, grad

        return scaled

    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    make(torch.tensor(2.0, dtype=D))(x)
    w = nn.Parameter(torch.tensor(2.0, dtype=D))
    f = make(w)
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, 7 * x.detach().sum())


def _plain_scaled(x, scale=2.0, *, shift=0.0):
    """Plain default values (`scale=1.0`): a new function of this code takes the kept proof
    where its defaults are plain values of the same types."""

    def grad(dy, variables=None):
        return dy * scale, [(dy * x).sum() for _ in variables or ()]

    return x * scale + shift, grad


def _with_defaults(defaults, kwdefaults):
    f = _plain_scaled
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, defaults, f.__closure__)
    g.__kwdefaults__ = kwdefaults
    return custom_gradient(g)


def test_a_new_decoration_with_plain_defaults_takes_the_kept_proof(monkeypatch):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    custom_gradient(_plain_scaled)(x)  # analysed: reads no Parameter
    analysed = _analyses(monkeypatch)
    for scale, shift in ((3.0, 1.0), (4.0, -1.0)):
        f = _with_defaults((scale,), {"shift": shift})
        assert reach_of(f).reads_none()  # before its first call
        y = f(x)
        assert hasattr(y.grad_fn, "plan")  # its first call: the plan the first one learned
        torch.testing.assert_close(y, x.detach() * scale + shift)
        (gx,) = torch.autograd.grad(y.sum(), x)
        torch.testing.assert_close(gx, torch.full((3,), scale, dtype=D))
    assert analysed == []


@pytest.mark.parametrize(
    "defaults, kwdefaults",
    [
        ((3,), {"shift": 0.0}),
        ((3.0,), {"shift": 0}),
        ((torch.tensor(3.0, dtype=D),), {"shift": 0.0}),
        ((3.0,), {"shift": torch.tensor(0.0, dtype=D)}),
    ],
    ids=["an int for a float", "an int keyword default", "a tensor", "a tensor keyword default"],
)
def test_a_new_decoration_whose_defaults_differ_in_type_is_proved_anew(
    monkeypatch, defaults, kwdefaults
):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    custom_gradient(_plain_scaled)(x)
    analysed = _analyses(monkeypatch)
    f = _with_defaults(defaults, kwdefaults)
    assert not reach_of(f).reads_none()  # not taken: analysed at its first call
    _grads(f, x)
    assert analysed == [f.__wrapped__]
    assert reach_of(f).reads_none()


def test_a_parameter_default_of_a_new_decoration_gives_its_gradient():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    custom_gradient(_plain_scaled)(x)  # the kept proof: reads no Parameter
    w = nn.Parameter(torch.tensor(2.0, dtype=D))
    f = _with_defaults((w,), {"shift": 0.0})
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, x.detach().sum())


def test_a_default_rebound_after_its_decoration_took_the_kept_proof_is_noticed():
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    custom_gradient(_plain_scaled)(x)  # the kept proof: reads no Parameter
    f = _with_defaults((3.0,), {"shift": 0.0})
    assert reach_of(f).reads_none()  # taken
    w = nn.Parameter(torch.tensor(2.0, dtype=D))
    f.__wrapped__.__defaults__ = (w,)
    assert not reach_of(f).reads_none()
    _, gw = _grads(f, x, w)
    torch.testing.assert_close(gw, x.detach().sum())


def _many_defaults(x, scale=2.0, mode="mul", bias=None, power=2, *, shift=0.5, gain=1.5):
    """Default values of several types, each tested in its place by the kept proof's `make`."""
    z = x * scale if mode == "mul" else x + scale
    dz = scale if mode == "mul" else 1.0

    def grad(dy):
        return dy * gain * power * z ** (power - 1) * dz

    return gain * z**power + shift + (0.0 if bias is None else bias), grad


_ALL = {"scale": 2.0, "mode": "mul", "bias": None, "power": 2}
_DEFAULTS = {
    # name: (defaults, keyword defaults, whether the kept proof is taken, the keyword arguments
    # given for the defaults a variant leaves out)
    "the same types": ((3.0, "add", None, 3), {"shift": 1.0, "gain": 2.0}, True, {}),
    "the very same values": (_many_defaults.__defaults__, _many_defaults.__kwdefaults__, True, {}),
    "an int for the first": ((3, "add", None, 3), {"shift": 1.0, "gain": 2.0}, False, {}),
    "a float for None": ((3.0, "add", 1.0, 3), {"shift": 1.0, "gain": 2.0}, False, {}),
    "a float for the last": ((3.0, "add", None, 3.0), {"shift": 1.0, "gain": 2.0}, False, {}),
    "one default fewer": (("add", None, 3), {"shift": 1.0, "gain": 2.0}, False, {"scale": 3.0}),
    "one default more": ((4.0, 3.0, "add", None, 3), {"shift": 1.0, "gain": 2.0}, False, {}),
    "no defaults": (None, {"shift": 1.0, "gain": 2.0}, False, _ALL),
    "an int keyword default": ((3.0, "add", None, 3), {"shift": 1.0, "gain": 2}, False, {}),
    "keywords in another order": ((3.0, "add", None, 3), {"gain": 2.0, "shift": 1.0}, False, {}),
    "a keyword default fewer": ((3.0, "add", None, 3), {"shift": 1.0}, False, {}),
    "no keyword defaults": ((3.0, "add", None, 3), None, False, {}),
}


@pytest.mark.parametrize("variant", _DEFAULTS.values(), ids=list(_DEFAULTS))
def test_a_new_decoration_takes_the_kept_proof_only_with_defaults_of_the_same_types(
    variant, monkeypatch
):
    """Each default and keyword default of a new function of the code is of the type the
    analysed function's is, in its place, or the new decoration is analysed anew; either way
    it gives plain autograd's gradient for its own defaults."""
    defaults, kwdefaults, taken, given = variant
    x = torch.linspace(0.5, 1.5, 3, dtype=D, requires_grad=True)
    custom_gradient(_many_defaults)(x)  # analysed: reads no Parameter; the proof is kept
    analysed = _analyses(monkeypatch)
    f = _many_defaults
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, defaults, f.__closure__)
    g.__kwdefaults__ = kwdefaults
    kwargs = given | ({} if kwdefaults and len(kwdefaults) == 2 else {"shift": 1.0, "gain": 2.0})
    decorated = custom_gradient(g)
    assert reach_of(decorated).reads_none() == taken  # before its first call
    (got,) = torch.autograd.grad(decorated(x, **kwargs).sum(), x)
    (want,) = torch.autograd.grad(_true(g)(x, **kwargs).sum(), x)
    torch.testing.assert_close(got, want)
    assert analysed == ([] if taken else [g])
    assert reach_of(decorated).reads_none()


def _cell_scaled(fill):
    """A new function of one code on each call, whose cell `scale` is filled after the
    decoration where `fill` is False (empty as it is decorated)."""
    if fill:
        scale = torch.tensor(2.0, dtype=D)

    @custom_gradient
    def scaled(x):
        return x * scale, lambda dy: dy * scale

    if not fill:
        scale = torch.tensor(3.0, dtype=D)
    return scaled, scale


def test_a_cell_empty_as_its_function_is_decorated_is_proved_anew(monkeypatch):
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    _cell_scaled(True)[0](x)  # analysed with the cell holding a plain tensor; the proof is kept
    analysed = _analyses(monkeypatch)
    f, scale = _cell_scaled(False)
    assert not reach_of(f).reads_none()  # the kept proof's `make` refused the empty cell
    (gx,) = _grads(f, x)
    torch.testing.assert_close(gx, scale.expand(3))
    assert analysed == [f.__wrapped__]
    assert reach_of(f).reads_none()


def test_a_plain_tensor_cell_that_requires_grad_is_not_calm():
    """A new decoration whose plain tensor cell requires grad takes the kept proof (the same
    types), but not as calm: its call goes through the general code, which refuses the
    gradient that would be lost (Note [lost gradients])."""
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    exp_scaled_by(torch.tensor(2.0, dtype=D))(x)  # analysed: reads no Parameter
    f = exp_scaled_by(torch.tensor(3.0, dtype=D, requires_grad=True))
    reach = reach_of(f)
    assert reach.proof == "none" and reach._unchanged()
    assert not reach.calm() and not reach.reads_none()
    with pytest.raises(CustomGradientValueError, match="closure `scale`, a tensor that requires grad"):  # fmt: skip
        f(x)


# --- a decoration per call takes the route of a decoration made once --------------------------


def _fresh(f):
    """A new function of f's code, as a `def` inside `forward` makes it."""
    g = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    g.__kwdefaults__ = f.__kwdefaults__ and dict(f.__kwdefaults__)
    return g


def _log1pexp(x):
    e = torch.exp(x)
    return torch.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))


def _clipped_relu(x, clip):
    def grad(dy):
        return dy * ((x > 0) & (x < clip)).to(dy.dtype), None

    return x.clamp(min=0, max=clip), grad


def _mul_sub(a, b):
    return (a * b, a - b), lambda du, dv: (du * b + dv, du * a - dv)


def _nested(a, b):
    def grad(dp, ds, dd):
        return dp * b + ds + dd, dp * a + ds - dd

    return {"p": a * b, "q": (a + b, a - b)}, grad


def _true(f):
    """f's maths under plain autograd, without its grad_fn (each grad_fn here is exact)."""
    return lambda *args, **kwargs: f(*args, **kwargs)[0]


_W, _B = nn.Parameter(torch.randn(3, 4, dtype=D)), nn.Parameter(torch.randn(3, dtype=D))
_ROUTE_CASES = {
    # name: (a new function of the code on each call, its tensor arguments, then its other
    # positional arguments and its keyword arguments)
    "log1pexp": (lambda: _fresh(_log1pexp), 1, (), {}),
    "clipped_relu, a float argument": (lambda: _fresh(_clipped_relu), 1, (0.5,), {}),
    "two in, two out": (lambda: _fresh(_mul_sub), 2, (), {}),
    "nested outputs": (lambda: _fresh(_nested), 2, (), {}),
    "a keyword argument over a default": (lambda: _fresh(_plain_scaled), 1, (), {"scale": 1.5}),
    "closure Parameters": (lambda: closure_layer(_W, _B).__wrapped__, 1, (), {}),
}


@pytest.mark.parametrize("case", _ROUTE_CASES.values(), ids=list(_ROUTE_CASES))
def test_a_decoration_per_call_takes_the_plan_of_a_decoration_made_once(case, monkeypatch):
    """Decorated once, then decorated anew on each call: from its first call, each new
    decoration takes the plan (its node, its kind) the decoration made once took, without
    proving its reach again, and gives plain autograd's gradients, to the Parameters too."""
    make, n_tensors, others, kwargs = case
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.randn(2, 4, dtype=D, generator=gen).requires_grad_() for _ in range(n_tensors)]  # fmt: skip
    args = (*tensors, *others)
    sources = [*tensors, _W, _B]
    once = custom_gradient(make())
    once(*args, **kwargs)  # the general code: learns the plan
    y_once = once(*args, **kwargs)
    node, kind = type(flatten(y_once)[0].grad_fn), reach_of(once).proof
    analysed = _analyses(monkeypatch)
    for _ in range(3):
        f = make()
        y = custom_gradient(f)(*args, **kwargs)
        assert [type(t.grad_fn) for t in flatten(y)] == [node] * len(flatten(y))
        assert all(hasattr(t.grad_fn, "plan") for t in flatten(y))
        got = torch.autograd.grad(flatten(y), sources, [torch.ones_like(t) for t in flatten(y)], allow_unused=True)  # fmt: skip
        want_y = _true(f)(*args, **kwargs)
        want = torch.autograd.grad(flatten(want_y), sources, [torch.ones_like(t) for t in flatten(want_y)], allow_unused=True)  # fmt: skip
        torch.testing.assert_close(got, want)
    assert analysed == []
    assert reach_of(custom_gradient(make())).proof == kind


# --- the route of a new decoration does not depend on whether its code's proof is kept ------


def _sigmoid(x):
    """Pure, with no closure cells: f may run again for a second derivative (Note [f run
    again]); decorated anew by each `custom_gradient(_sigmoid)`."""
    y = torch.sigmoid(x)
    return y, lambda dy: dy * y * (1 - y)


_LAYER = (nn.Parameter(torch.randn(3, 4, dtype=D)), nn.Parameter(torch.randn(3, dtype=D)))
_SCALE = nn.Parameter(torch.tensor(1.5, dtype=D))
_DECORATIONS = {
    "closure Parameters (unrecorded, watched)": lambda: closure_layer(*_LAYER),
    "a plain tensor in the closure (unrecorded)": lambda: exp_scaled_by(torch.tensor(2.0, dtype=D)),
    "a Parameter in the closure": lambda: exp_scaled_by(_SCALE),
    "pure, run again for a second derivative": lambda: custom_gradient(_sigmoid),
}


@pytest.mark.parametrize("make", _DECORATIONS.values(), ids=list(_DECORATIONS))
@pytest.mark.parametrize("kept", [True, False], ids=["proof kept", "proof dropped"])
def test_a_new_decoration_takes_the_route_of_the_first_whether_or_not_its_proof_is_kept(
    make, kept, monkeypatch
):
    """The kept proofs are bounded (`_KEPT` codes): a suite or program that decorates more codes
    than that drops the oldest, and a new decoration of such a code, which starts on the plans
    its code learned, is analysed before its plans are made (a plan made before the analysis
    recorded f's ops where the first decoration's did not)."""
    x = torch.rand(2, 4, dtype=D, requires_grad=True)
    first = make()
    first(x)  # the general code; it learns the plan
    want_saved = saved_while_called(first, x)
    sources = (x, *_LAYER, _SCALE)

    def grads(f):
        y = f(x)
        g = torch.autograd.grad((y * y).sum(), sources, create_graph=True, allow_unused=True)
        second = torch.autograd.grad(sum(t.sin().sum() for t in g if t is not None), x)
        return g, second

    want = grads(first)
    if not kept:
        for code in list(_reach_check.PROOFS):
            monkeypatch.delitem(_reach_check.PROOFS, code)
    again = make()
    assert saved_while_called(again, x) == want_saved
    torch.testing.assert_close(grads(again), want)


def test_planning_a_new_code_leaves_no_reference_cycle():
    """Making a plan (its generated source, its node) for a code of nested outputs leaves
    nothing for the cyclic collector: a program that decorates many codes frees each as it
    goes."""
    x = torch.linspace(-1, 1, 3, dtype=D, requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        for k in range(3):  # a new code each time: its plan is generated anew
            scope = {"torch": torch}
            exec(
                "def f(a):\n"
                f"    p, q = a * {k + 2}, (a + 1, a - 1)\n"
                "    def grad(dp, dq0, dq1):\n"
                f"        return dp * {k + 2} + dq0 + dq1\n"
                "    return {'p': p, 'q': q}, grad\n",
                scope,
            )
            f = custom_gradient(scope["f"])
            for _ in range(2):  # the general code, then the plan
                out = f(x)
                (g,) = torch.autograd.grad(out["p"].sum() + sum(t.sum() for t in out["q"]), x)
                torch.testing.assert_close(g, torch.full_like(x, k + 4.0))
            del f, scope, out
        assert cyclic_garbage_of(__name__) == []
    finally:
        gc.enable()
