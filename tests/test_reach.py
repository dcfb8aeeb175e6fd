"""Skipping the Parameter watcher only when f provably reads no Parameter
(Note [watching only when needed]): every way f can reach a Parameter must keep the watcher,
and the Parameter must then get its gradient."""

import functools
import sys
import types

import pytest
import torch
from helpers import D, reach_of

from tf_compat_grad import custom_gradient
from tf_compat_grad.examples import log1pexp

W = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
PLAIN = torch.full((3,), 2.0, dtype=D)
HOLDER = [W]
REBOUND = torch.full((3,), 2.0, dtype=D)


def _grad_with_variables(dy, variables=None):
    return dy * 2, [dy.sum() * torch.ones(3, dtype=D) for _ in variables or ()]


def _helper_reading_w(x):
    return x * W


@custom_gradient
def via_global(x):
    return x * W, _grad_with_variables


@custom_gradient
def via_helper(x):
    return _helper_reading_w(x), _grad_with_variables


@custom_gradient
def via_list(x):
    return x * HOLDER[0], _grad_with_variables


@custom_gradient
def via_rebound_global(x):
    return x * REBOUND, _grad_with_variables


@custom_gradient
def pure(x):
    return x * PLAIN * torch.nn.functional.softplus(x), lambda dy: dy * 2


def _closure():
    v = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))

    @custom_gradient
    def via_closure(x):
        return x * v, _grad_with_variables

    return via_closure, v


def _user_module():
    module = types.ModuleType("user_params")
    module.V = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    sys.modules["user_params"] = module
    namespace = {"user_params": module, "_grad_with_variables": _grad_with_variables}
    exec(
        "def via_module(x):\n    return x * user_params.V, _grad_with_variables\n",
        namespace,
    )
    return custom_gradient(namespace["via_module"]), module.V


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))

    @custom_gradient
    def forward(self, x):
        return x * self.weight, _grad_with_variables


def _x():
    return torch.ones(3, dtype=D, requires_grad=True)


def _check_variable_gradient(fn, parameter):
    parameter.grad = None
    x = _x()
    fn(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    torch.testing.assert_close(parameter.grad, torch.full((3,), 3.0, dtype=D))


@pytest.mark.parametrize(
    ("make"),
    [
        pytest.param(lambda: (via_global, W), id="global"),
        pytest.param(lambda: (via_helper, W), id="helper function"),
        pytest.param(lambda: (via_list, W), id="global list"),
        pytest.param(_closure, id="closure"),
        pytest.param(_user_module, id="user module attribute"),
    ],
)
def test_every_path_to_a_parameter_keeps_the_watcher(make):
    fn, parameter = make()
    _check_variable_gradient(fn, parameter)


def test_module_forward_reads_its_weight():
    module = Scale()
    _check_variable_gradient(module, module.weight)


def test_rebinding_a_global_to_a_parameter_is_noticed():
    global REBOUND
    x = _x()
    via_rebound_global(x).sum().backward()  # a plain tensor: no variables
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    saved = REBOUND
    REBOUND = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    try:
        _check_variable_gradient(via_rebound_global, REBOUND)
    finally:
        REBOUND = saved


def test_parameter_reached_through_a_keyword_argument_is_watched():
    @custom_gradient
    def scaled(x, *, layer):
        return x * layer.weight, _grad_with_variables

    layer = Scale()
    _check_variable_gradient(lambda x: scaled(x, layer=layer), layer.weight)


@pytest.mark.parametrize("fn", [pure, log1pexp], ids=["pure", "log1pexp"])
def test_pure_functions_are_not_watched(fn):
    assert not reach_of(fn).possible(())


@pytest.mark.parametrize("fn", [via_global, via_helper, via_list], ids=["global", "helper", "list"])
def test_functions_that_can_reach_a_parameter_are_watched(fn):
    assert reach_of(fn).possible(())


def test_function_without_module_name_is_analysed():
    def helper(x):
        return x * 2

    helper.__module__ = None

    @custom_gradient
    def f(x):
        return helper(x), lambda dy: dy * 3

    x = _x()
    f(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 3.0, dtype=D))


def test_a_global_defined_after_the_first_call_is_noticed():
    namespace = {"_grad_with_variables": _grad_with_variables, "torch": torch}
    exec("def later(x):\n    return x * LATER, _grad_with_variables\n", namespace)
    fn = custom_gradient(namespace["later"])
    namespace["LATER"] = torch.full((3,), 2.0, dtype=D)  # a plain tensor first
    x = _x()
    fn(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    parameter = namespace["LATER"] = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    _check_variable_gradient(fn, parameter)


def test_a_global_missing_at_the_first_analysis_is_watched_once_defined():
    namespace = {"_grad_with_variables": _grad_with_variables, "torch": torch}
    exec(
        "def maybe(x, use):\n    return (x * LATE if use else x * 2), _grad_with_variables\n",
        namespace,
    )
    fn = custom_gradient(namespace["maybe"])
    x = _x()
    fn(x, use=False).sum().backward()  # LATE is not defined yet: the analysis saw it missing
    parameter = namespace["LATE"] = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    parameter.grad = None
    x = _x()
    fn(x, use=True).sum().backward()
    torch.testing.assert_close(parameter.grad, torch.full((3,), 3.0, dtype=D))


def test_a_module_imported_inside_f_is_watched():
    module = types.ModuleType("user_params_imported")
    module.V = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    sys.modules["user_params_imported"] = module
    namespace = {"_grad_with_variables": _grad_with_variables}
    exec(
        "def via_import(x):\n"
        "    import user_params_imported\n"
        "    return x * user_params_imported.V, _grad_with_variables\n",
        namespace,
    )
    _check_variable_gradient(custom_gradient(namespace["via_import"]), module.V)


def test_importing_torch_inside_f_stays_unwatched():
    namespace: dict = {}
    exec("def pure(x):\n    import torch\n    return torch.exp(x), lambda dy: dy\n", namespace)
    assert not reach_of(custom_gradient(namespace["pure"])).possible(())


def test_only_names_looked_up_as_globals_are_read_from_the_globals():
    """`exp` in `torch.exp(x)` is an attribute of torch: a global `exp` holding a Parameter is
    not what f reads, while a class body inside f reads its free names from the globals."""
    namespace = {"torch": torch, "exp": torch.nn.Parameter(torch.ones(3, dtype=D))}
    exec("def attribute(x):\n    return torch.exp(x), lambda dy: dy\n", namespace)
    assert not reach_of(custom_gradient(namespace["attribute"])).possible(())
    namespace = {"_grad": _grad_with_variables, "SCALE": W}
    exec(
        "def class_body(x):\n"
        "    class Holder:\n"
        "        scale = SCALE\n"
        "    return x * Holder.scale, _grad\n",
        namespace,
    )
    _check_variable_gradient(custom_gradient(namespace["class_body"]), W)


def _rebinding_cases():
    def by_defaults(fn, parameter):
        fn.__wrapped__.__defaults__ = (parameter,)

    def by_kwdefaults(fn, parameter):
        fn.__wrapped__.__kwdefaults__["w"] = parameter  # the same dict, changed in place

    def by_code(fn, parameter):
        fn.__wrapped__.__globals__["HELD"] = parameter
        fn.__wrapped__.__code__ = _reads_held.__code__  # runs in f's globals

    return [
        pytest.param("def f(x, w=PLAIN):\n    return x * w, _grad\n", by_defaults, id="defaults"),
        pytest.param(
            "def f(x, *, w=PLAIN):\n    return x * w, _grad\n", by_kwdefaults, id="kwdefaults"
        ),
        pytest.param("def f(x, w=PLAIN):\n    return x * w, _grad\n", by_code, id="code"),
    ]


def _reads_held(x, w=None):
    return x * HELD, _grad  # noqa: F821 (names of the namespace its code is moved into)


@pytest.mark.parametrize(("source", "rebind"), _rebinding_cases())
def test_rebinding_what_an_analysed_function_holds_is_noticed(source, rebind):
    """The cached answer depends on f's code and default values, not only on its names."""
    namespace = {"PLAIN": PLAIN, "_grad": _grad_with_variables}
    exec(source, namespace)
    fn = custom_gradient(namespace["f"])
    x = _x()
    fn(x).sum().backward()  # a plain tensor: no variables
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    rebind(fn, parameter)
    _check_variable_gradient(fn, parameter)


def _module(name, source, **names):
    module = types.ModuleType(name)
    module.__dict__.update(torch=torch, _grad=_grad_with_variables, **names)
    sys.modules[name] = module
    exec(source, module.__dict__)
    return module


def _own_module_by_introspection():
    parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    source = "def h(): pass\ndef f(x):\n    return x * torch.inspect.getmodule(h).W, _grad\n"
    return _module("reach_introspection", source, W=parameter).f, parameter


def _relative_import():
    parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    package = _module("reach_package", "")
    package.__path__ = []
    _module("reach_package.math", "", W=parameter)
    source = "def f(x):\n    from .math import W\n    return x * W, _grad\n"
    inner = _module("reach_package.inner", source, __package__="reach_package")
    return inner.f, parameter


def _object_array():
    numpy = pytest.importorskip("numpy")
    parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    held = numpy.empty(1, dtype=object)
    held[0] = parameter
    return _module(
        "reach_object_array", "def f(x):\n    return x * HELD[0], _grad\n", HELD=held
    ).f, parameter


def _base_of_a_view():
    parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    source = "def f(x):\n    return x * VIEW._base, _grad\n"
    return _module("reach_base", source, VIEW=parameter[:]).f, parameter


@pytest.mark.parametrize(
    "make",
    [_own_module_by_introspection, _relative_import, _object_array, _base_of_a_view],
    ids=["inspect.getmodule", "relative import", "numpy object array", "a view's _base"],
)
def test_indirect_routes_to_a_parameter_keep_the_watcher(make):
    fn, parameter = make()
    _check_variable_gradient(custom_gradient(fn), parameter)


@pytest.mark.parametrize("holder", ["function", "module"])
def test_an_attribute_rebound_to_a_parameter_after_the_first_call_is_noticed(holder):
    """`h.scale` on a helper function or a user module, a plain tensor first."""
    source = "def h(): pass\n" if holder == "function" else ""
    module = _module(f"reach_attribute_{holder}", source)
    target = module.h if holder == "function" else types.ModuleType("reach_holder")
    module.HOLDER = target
    exec("def f(x):\n    return x * HOLDER.scale, _grad\n", module.__dict__)
    fn = custom_gradient(module.f)
    target.scale = PLAIN
    x = _x()
    fn(x).sum().backward()  # a plain tensor: no variables
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0, dtype=D))
    target.scale = parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    _check_variable_gradient(fn, parameter)


def test_a_module_attribute_missing_at_the_first_analysis_is_watched_once_defined():
    holder = types.ModuleType("reach_late_holder")
    module = _module("reach_late_attribute", "", HOLDER=holder)
    exec("def f(x, use):\n    return (x * HOLDER.late if use else x * 2), _grad\n", module.__dict__)
    fn = custom_gradient(module.f)
    fn(_x(), use=False).sum().backward()  # `late` is not defined yet: the analysis saw it missing
    holder.late = parameter = torch.nn.Parameter(torch.full((3,), 2.0, dtype=D))
    x = _x()
    fn(x, use=True).sum().backward()
    torch.testing.assert_close(parameter.grad, torch.full((3,), 3.0, dtype=D))


@custom_gradient
def calls_decorated_pure(x):
    return pure(x), lambda dy: dy


@custom_gradient
def calls_decorated_reader(x):
    return via_global(x), lambda dy: dy


def test_a_decorated_function_called_inside_f_is_analysed_through():
    """What a decorated function runs is what it reads: `pure` keeps the caller unwatched,
    `via_global` (which reads W) does not."""
    assert not reach_of(calls_decorated_pure).possible(())
    assert reach_of(calls_decorated_reader).possible(())


def test_a_global_deleted_after_the_first_call_is_noticed():
    """The per-call check reads a global by key: once deleted, it answers "changed" and f's own
    NameError is what the caller sees."""
    namespace = {
        "torch": torch,
        "SCALE": torch.full((3,), 2.0, dtype=D),
        "_grad": _grad_with_variables,
    }
    exec("def f(x):\n    return x * SCALE, _grad\n", namespace)
    fn = custom_gradient(namespace["f"])
    fn(_x()).sum().backward()
    assert reach_of(fn).reads_none()
    del namespace["SCALE"]
    assert not reach_of(fn).reads_none()
    with pytest.raises(NameError, match="SCALE"):
        fn(_x())


def test_a_closure_cell_emptied_after_the_first_call_is_noticed():
    def make():
        scale = torch.full((3,), 2.0, dtype=D)

        @custom_gradient
        def f(x):
            return x * scale, _grad_with_variables

        def forget():
            nonlocal scale
            del scale

        return f, forget

    fn, forget = make()
    fn(_x()).sum().backward()
    assert reach_of(fn).reads_none()
    forget()
    assert not reach_of(fn).reads_none()
    with pytest.raises(NameError, match="scale"):
        fn(_x())


def test_a_name_rebound_on_every_call_compiles_no_new_check():
    """Each call re-analyses f, but the check of one form is compiled once."""
    from tf_compat_grad._reach_check import _outer_maker as _check_maker

    namespace = {"torch": torch, "STEP": torch.ones(3, dtype=D), "_grad": _grad_with_variables}
    exec("def f(x):\n    return x * STEP, _grad\n", namespace)
    fn = custom_gradient(namespace["f"])
    fn(_x())
    misses = _check_maker.cache_info().misses
    for step in range(5):
        namespace["STEP"] = torch.full((3,), float(step), dtype=D)
        fn(_x()).sum().backward()
    assert _check_maker.cache_info().misses == misses


def test_a_wrapper_that_says_it_is_torchs_is_still_read():
    # `functools.wraps(torch_function)` gives a user's function torch's `__module__`; the proof
    # goes by where the code was defined, so the Parameter it reads reaches grad_fn.
    w = torch.nn.Parameter(torch.tensor([2.0, -1.0], dtype=torch.float64))
    seen = []

    @functools.wraps(torch.nn.functional.relu)
    def scaled(x):
        return x * w

    @custom_gradient
    def f(x):
        def grad(dy, variables=None):
            seen.append(variables)
            return dy * w, [dy * x]

        return scaled(x), grad

    x = torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True)
    (gw,) = torch.autograd.grad(f(x).sum(), w)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] is w
    torch.testing.assert_close(gw, x.detach())
