"""Property-based differential tests against a plain-Python oracle of TensorFlow's rules.

Hypothesis (deterministic: `derandomize=True`, no example database) generates a call: nested
positional arguments (lists, tuples, dicts, namedtuples, depth <= 3) mixing float32 / float64 /
bfloat16 tensors that do and do not require grad, int tensors, Python numbers, bools, strings,
empty containers and the same tensor passed twice; keyword arguments; Parameters read in f; a
nested output structure of linear functions of those inputs, some outputs unused by the loss;
and a grad_fn that returns the TF-rule gradients, with random `None`s, in a random structure.
Some cases carry one mistake (a None argument, a non-pair, a missing `variables` parameter, a
wrong gradient count).

The oracle predicts, from TensorFlow's rules alone (items 5-39):
- inputs are the positional leaves in `tf.nest.flatten` order (dicts by sorted key), one
  gradient slot each, strings and Python numbers included; keyword arguments are not inputs;
- grad_fn gets one upstream per flattened output, in flattened order, zeros for unused outputs
  (of the output's dtype), and is called once per backward, with `variables` (the Parameters f
  read, in order of first use) only when there are any;
- a tensor's gradient is the sum over its slots (the same tensor passed twice), None when every
  slot's gradient is None, zeros when its gradient only comes from unused outputs;
- a call whose output is computed from a tensor passed by keyword that requires grad (and is
  not also passed positionally) is refused: its gradient would be lost (item 15);
- the errors and their types.
The number of generated cases is asserted and printed at the end of the module.

Item numbers refer to docs/tensorflow_semantics.md.
"""

import collections
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tf_compat_grad import CustomGradientTypeError, CustomGradientValueError, custom_gradient

MAX_EXAMPLES = 1200
MAX_EXAMPLES_FUNC = 400
SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
COUNTS: collections.Counter = collections.Counter()
# Hypothesis leans towards the first choice of a sampled_from (it shrinks towards it), so the
# more interesting choice comes first.
TRUE_MOSTLY = st.sampled_from([True, True, True, False])

FLOAT_DTYPES = [torch.float32, torch.float64, torch.bfloat16]
SHAPES = [(), (0,), (3,), (2, 3)]
SCALES = [0.5, 1.0, 2.0, -1.5, 3.0]  # exact in bfloat16, and so are the products below
WEIGHTS = [1.0, 0.5, 2.0, -1.0]
KEYS = ["a", "b", "c", "k", "z"]
Point = collections.namedtuple("Point", ["x", "y"])
Single = collections.namedtuple("Single", ["v"])
Triple = collections.namedtuple("Triple", ["p", "q", "r"])
NAMEDTUPLES = [Point, Single, Triple]


@pytest.fixture(scope="module", autouse=True)
def report_counts(terminal_report):
    yield
    if COUNTS:
        terminal_report(
            [
                "test_properties generated cases: "
                + ", ".join(f"{key}={value}" for key, value in sorted(COUNTS.items()))
            ]
        )


# ------------------------------------------------------------------ the oracle's tf.nest


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def nest_flatten(tree):
    """`tf.nest.flatten`: dicts by sorted key, namedtuples by field, None is a leaf."""
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree) for leaf in nest_flatten(tree[key])]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in nest_flatten(item)]
    return [tree]


def nest_pack(structure, flat):
    """`tf.nest.pack_sequence_as`, keeping dict insertion order."""
    it = iter(flat)

    def build(s):
        if isinstance(s, dict):
            values = {key: build(s[key]) for key in sorted(s)}
            return type(s)((key, values[key]) for key in s)
        if is_namedtuple(s):
            return type(s)(*(build(item) for item in s))
        if isinstance(s, (list, tuple)):
            return type(s)(build(item) for item in s)
        return next(it)

    return build(structure)


def assert_same_structure(got, expected, path="out"):
    assert type(got) is type(expected), f"{path}: {type(got)} is not {type(expected)}"
    if isinstance(expected, dict):
        assert list(got) == list(expected), f"{path}: keys {list(got)} != {list(expected)}"
        for key in expected:
            assert_same_structure(got[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected), path
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_same_structure(g, e, f"{path}[{i}]")


def assert_tensor_equal(got, expected, what):
    assert isinstance(got, torch.Tensor), f"{what}: {got!r}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    torch.testing.assert_close(got.detach(), expected.detach(), msg=what)


# ------------------------------------------------------------------ generated cases


@dataclass(frozen=True)
class Out:
    """One output leaf: `source * scale` ("lin"), `source.sum() * scale` ("sum"), or the
    Python float `scale` ("const"). An object, not a tuple, so nest_flatten keeps it whole."""

    kind: str
    source: Any
    scale: float


@dataclass
class Case:
    args: tuple  # the positional arguments as passed
    kwargs: dict
    params: list  # Parameters f reads, in the order f first reads them
    outputs: Any  # a tree of `Out`
    unused: set  # flattened output indices the loss leaves out
    weights: list  # per flattened output
    none_grad: set  # flattened input slots whose gradient grad_fn returns as None
    none_param_grad: set
    grad_structure: str  # "flat", "mirror" or "bare"
    broadcast_grads: bool  # return 0-d gradients for sum outputs, expanded by the library
    grad_fn_has_variables: bool
    int_slot_float_grad: bool  # grad_fn returns a float gradient for int inputs (dropped)
    mistake: str | None
    grad_enabled: bool
    flat: list = field(default_factory=list)  # nest_flatten(args)


def tensor_values(shape, dtype, seed):
    n = math.prod(shape)
    values = (torch.arange(n, dtype=torch.float64) + seed) % 5 - 2  # -2..2, exact everywhere
    return values.reshape(shape).to(dtype)


@st.composite
def leaf_strategy(draw, tensors, counter):
    kind = draw(
        st.sampled_from(["float", "float", "float", "int", "pyfloat", "pyint", "bool", "str"])
        | (st.just("dup") if tensors else st.nothing())
    )
    counter[0] += 1
    seed = counter[0]
    if kind == "float":
        dtype = draw(st.sampled_from(FLOAT_DTYPES))
        shape = draw(st.sampled_from(SHAPES))
        t = tensor_values(shape, dtype, seed).requires_grad_(draw(TRUE_MOSTLY))
        tensors.append(t)
        return t
    if kind == "int":
        t = tensor_values(draw(st.sampled_from(SHAPES)), torch.int64, seed)
        tensors.append(t)
        return t
    if kind == "dup":
        return draw(st.sampled_from(tensors))
    if kind == "pyfloat":
        return draw(st.sampled_from([0.5, -2.0, 1e-3]))
    if kind == "pyint":
        return draw(st.integers(-3, 3))
    if kind == "bool":
        return draw(st.booleans())
    return draw(st.sampled_from(["", "label", "ß"]))


@st.composite
def tree_strategy(draw, depth, leaf):
    """A nested structure of depth <= `depth` whose leaves come from `leaf()`."""
    if depth == 0 or draw(st.sampled_from([False, True, True])):
        return draw(leaf())
    kind = draw(st.sampled_from(["list", "tuple", "dict", "namedtuple"]))
    if kind == "namedtuple":
        nt = draw(st.sampled_from(NAMEDTUPLES))
        return nt(*(draw(tree_strategy(depth - 1, leaf)) for _ in nt._fields))
    size = draw(st.sampled_from([2, 1, 3, 0]))
    if kind == "dict":
        keys = draw(st.permutations(KEYS))[:size]  # insertion order is not sorted order
        return {key: draw(tree_strategy(depth - 1, leaf)) for key in keys}
    items = [draw(tree_strategy(depth - 1, leaf)) for _ in range(size)]
    return items if kind == "list" else tuple(items)


def pick(draw, indices):
    """A random subset, each index in it with probability about 1/3."""
    return {i for i in indices if draw(st.sampled_from([False, False, True]))}


@st.composite
def case_strategy(draw):
    tensors, counter = [], [0]

    def leaf():
        return leaf_strategy(tensors, counter)

    args = tuple(draw(tree_strategy(3, leaf)) for _ in range(draw(st.sampled_from([2, 1, 3, 0]))))
    kwargs = {}
    for name in draw(st.lists(st.sampled_from(["alpha", "beta", "gamma"]), unique=True)):
        kind = draw(st.sampled_from(["tensor", "tensor", "pyfloat", "str"]))
        if kind == "tensor":
            counter[0] += 1
            dtype = draw(st.sampled_from(FLOAT_DTYPES))
            shape = draw(st.sampled_from(SHAPES))
            kwargs[name] = tensor_values(shape, dtype, counter[0]).requires_grad_(draw(TRUE_MOSTLY))
        else:
            kwargs[name] = 2.5 if kind == "pyfloat" else "mode"
    params = [
        torch.nn.Parameter(tensor_values(draw(st.sampled_from(SHAPES)), torch.float64, 7 + i))
        for i in range(draw(st.sampled_from([0, 1, 2, 0])))
    ]
    if len(params) == 2 and draw(st.booleans()):
        params.reverse()  # f reads them in this order

    flat = nest_flatten(args)
    sources = [("slot", i) for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    sources += [("kw", k) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    sources += [("param", i) for i in range(len(params))]

    @st.composite
    def out_leaf(draw):
        if not sources or not draw(TRUE_MOSTLY):
            return Out("const", None, draw(st.sampled_from([1.5, -0.5])))
        source = draw(st.sampled_from(sources))
        return Out(draw(st.sampled_from(["lin", "sum"])), source, draw(st.sampled_from(SCALES)))

    outputs = draw(tree_strategy(3, out_leaf).filter(lambda t: len(nest_flatten(t)) > 0))
    flat_out = nest_flatten(outputs)
    n_out = len(flat_out)
    mistake = draw(
        st.sampled_from([None] * 6 + ["count", "count", "none_arg", "not_a_pair", "no_variables"])
    )
    if mistake == "none_arg":
        args = (*args, draw(st.sampled_from([None, [1.0, None], {"k": (None,)}])))
    case = Case(
        args=args,
        kwargs=kwargs,
        params=params,
        outputs=outputs,
        unused=pick(draw, range(n_out)),
        weights=[draw(st.sampled_from(WEIGHTS)) for _ in range(n_out)],
        none_grad=pick(draw, range(len(flat))),
        none_param_grad=pick(draw, range(len(params))),
        grad_structure=draw(st.sampled_from(["flat", "mirror", "bare"])),
        broadcast_grads=draw(st.booleans()),
        grad_fn_has_variables=bool(params) or draw(st.booleans()),
        int_slot_float_grad=draw(st.booleans()),
        mistake=mistake,
        grad_enabled=draw(TRUE_MOSTLY),
    )
    if mistake == "no_variables":
        case.grad_fn_has_variables = False
    case.flat = nest_flatten(case.args)
    return case


# ------------------------------------------------------------------ f and grad_fn


def source_value(case, source, flat=None):
    kind, key = source
    if kind == "slot":
        return (case.flat if flat is None else flat)[key]
    if kind == "kw":
        return case.kwargs[key]
    return case.params[key]


def int_scale(scale):
    return int(scale) if scale == int(scale) else 2


def out_value(case, spec, flat=None):
    """The plain-torch value of one output (the same ops f runs), from `flat` positional
    leaves (those of `case` by default)."""
    if spec.kind == "const":
        return spec.scale
    x = source_value(case, spec.source, flat)
    scale = spec.scale if x.is_floating_point() else int_scale(spec.scale)
    return x * scale if spec.kind == "lin" else x.sum() * scale


def contribution(case, spec, dy, shape, dtype):
    """d(output)/d(source) applied to the upstream `dy`, shaped like the source."""
    scale = spec.scale if dtype.is_floating_point else int_scale(spec.scale)
    if spec.kind == "lin":
        return (dy * scale).to(dtype)
    g = (dy * scale).to(dtype)  # 0-d
    return g if case.broadcast_grads else g.expand(shape)


def make_f(case, log):
    def grad_fn_body(upstream, variables):
        log["grad_fn_calls"] += 1
        log["upstream"].append(list(upstream))
        log["variables"].append(variables)
        specs = nest_flatten(case.outputs)
        slot_grads = []
        for s, x in enumerate(case.flat):
            if not isinstance(x, torch.Tensor) or s in case.none_grad:
                slot_grads.append(None)
                continue
            if not x.is_floating_point():
                slot_grads.append(torch.ones(x.shape) if case.int_slot_float_grad else None)
                continue
            total = None
            for j, spec in enumerate(specs):
                if spec.kind != "const" and spec.source == ("slot", s):
                    part = contribution(case, spec, upstream[j], x.shape, x.dtype)
                    total = part if total is None else total + part
            slot_grads.append(torch.zeros_like(x) if total is None else total)
        if case.mistake == "count":
            slot_grads = [*slot_grads, None]
        if case.grad_structure == "mirror" and case.mistake != "count":
            input_grads = nest_pack(case.args, slot_grads)
        elif case.grad_structure == "bare" and len(slot_grads) == 1:
            input_grads = slot_grads[0]
        else:
            input_grads = slot_grads
        if not case.params:
            return input_grads
        param_grads = []
        for i, p in enumerate(case.params):
            total = torch.zeros_like(p)
            for j, spec in enumerate(specs):
                if spec.kind != "const" and spec.source == ("param", i):
                    total = total + contribution(case, spec, upstream[j], p.shape, p.dtype)
            param_grads.append(None if i in case.none_param_grad else total)
        return input_grads, param_grads

    def f(*args, **kwargs):
        log["f_calls"] += 1
        assert len(args) == len(case.args)
        if not log["transformed"]:  # under torch.func f sees the transform's tensors
            assert all(a is b for a, b in zip(args, case.args, strict=True)), "f got other args"
        assert kwargs.keys() == case.kwargs.keys()
        assert all(kwargs[k] is v for k, v in case.kwargs.items()), "f got other kwargs"
        for p in case.params:
            p.sum()  # read in this order: the order of `variables`
        flat = nest_flatten(args)
        result = nest_pack(
            case.outputs, [out_value(case, s, flat) for s in nest_flatten(case.outputs)]
        )

        if case.grad_fn_has_variables:

            def grad_fn(*upstream, variables=None):
                return grad_fn_body(upstream, variables)
        else:

            def grad_fn(*upstream):
                return grad_fn_body(upstream, None)

        if case.mistake == "not_a_pair":
            return result, grad_fn, "extra"
        return result, grad_fn

    return f


# ------------------------------------------------------------------ the property


def unique_tensors(values):
    seen = {}
    for v in values:
        if isinstance(v, torch.Tensor):
            seen.setdefault(id(v), v)
    return list(seen.values())


def loses_a_keyword_gradient(case, spec, positional):
    """An output computed from a keyword tensor that requires grad and is not also passed
    positionally: its gradient would be lost, so the call is refused (item 15)."""
    if spec.kind == "const" or spec.source[0] != "kw":
        return False
    tensor = case.kwargs[spec.source[1]]
    return tensor.requires_grad and all(tensor is not t for t in positional)


def new_log(transformed=False):
    log = collections.Counter(grad_fn_calls=0, f_calls=0)
    log["upstream"], log["variables"], log["transformed"] = [], [], transformed
    return log


def run_case(case):
    log = new_log()
    decorated = custom_gradient(make_f(case, log))
    flat_out_specs = nest_flatten(case.outputs)
    positional = unique_tensors(case.flat)
    recorded = case.grad_enabled and (bool(case.params) or any(t.requires_grad for t in positional))
    COUNTS["cases"] += 1

    # ---- errors at call time
    call_error = None
    if case.mistake in ("none_arg", "not_a_pair"):
        call_error = CustomGradientValueError
    elif case.mistake == "no_variables" and case.params:
        call_error = CustomGradientTypeError
    if call_error is not None:
        COUNTS[f"error_{case.mistake}"] += 1
        with torch.set_grad_enabled(case.grad_enabled), pytest.raises(call_error):
            decorated(*case.args, **case.kwargs)
        assert log["f_calls"] == (0 if case.mistake == "none_arg" else 1)
        return

    if case.grad_enabled and any(
        loses_a_keyword_gradient(case, s, positional) for s in flat_out_specs
    ):
        COUNTS["error_lost_keyword_gradient"] += 1  # refused, where TF drops it (item 15)
        with pytest.raises(CustomGradientValueError, match="depends on keyword"):
            decorated(*case.args, **case.kwargs)
        assert log["f_calls"] == 1
        return

    with torch.set_grad_enabled(case.grad_enabled):
        out = decorated(*case.args, **case.kwargs)
    assert log["f_calls"] == 1

    # ---- outputs: structure, values, new tensors
    with torch.no_grad():
        expected_flat = [torch.as_tensor(out_value(case, s)) for s in flat_out_specs]
    expected = nest_pack(case.outputs, expected_flat)
    assert_same_structure(out, expected)
    got_flat = nest_flatten(out)
    inputs = {id(x) for x in [*positional, *case.kwargs.values(), *case.params]}
    for j, (g, e) in enumerate(zip(got_flat, expected_flat, strict=True)):
        assert_tensor_equal(g, e, f"output {j}")
        assert id(g) not in inputs, "an output is one of the inputs (item 10)"
    if not case.grad_enabled:
        COUNTS["no_grad"] += 1
        assert not any(t.requires_grad for t in got_flat)
        assert log["grad_fn_calls"] == 0
        return

    # ---- which outputs are differentiable: the node's float outputs; nothing without a node
    # (a keyword tensor that needs a gradient, which f's own graph would give one, is refused)
    for j, t in enumerate(got_flat):
        differentiable = recorded and t.is_floating_point()
        assert t.requires_grad == differentiable, f"output {j}: requires_grad {t.requires_grad}"

    # ---- the loss and what it is differentiated with respect to
    used = [
        (j, t)
        for j, t in enumerate(got_flat)
        if j not in case.unused and t.is_floating_point() and t.requires_grad
    ]
    targets = unique_tensors(
        [*[t for t in positional if t.requires_grad], *case.kwargs.values(), *case.params]
    )
    targets = [t for t in targets if t.requires_grad]
    if not used or not targets:
        COUNTS["no_backward"] += 1

        assert log["grad_fn_calls"] == 0
        return
    loss = sum((t.double() * case.weights[j]).sum() for j, t in used)
    assert recorded, "an output that needs a gradient comes from the node"

    if case.mistake == "count":
        COUNTS["error_count"] += 1
        with pytest.raises(CustomGradientValueError):
            torch.autograd.grad(loss, targets, allow_unused=True)
        return
    grads = torch.autograd.grad(loss, targets, allow_unused=True)
    by_id = {id(t): g for t, g in zip(targets, grads, strict=True)}

    # ---- what grad_fn received
    upstream_expected = []
    for j, e in enumerate(expected_flat):
        w = 0.0 if j in case.unused or not e.is_floating_point() else case.weights[j]
        upstream_expected.append(torch.full_like(e, w))
    COUNTS["recorded"] += 1
    assert log["grad_fn_calls"] == 1, "grad_fn is called once per backward (item 23)"
    (upstream,) = log["upstream"]
    assert len(upstream) == len(expected_flat), "one upstream per flattened output"
    for j, (u, e) in enumerate(zip(upstream, upstream_expected, strict=True)):
        assert_tensor_equal(u, e, f"upstream {j}")
    (variables,) = log["variables"]
    if case.params:
        assert isinstance(variables, list)
        assert [id(v) for v in variables] == [id(p) for p in case.params]
    else:
        assert variables is None, "no `variables` keyword without Parameters (item 25)"

    # ---- the gradients
    for t in targets:
        got = by_id[id(t)]
        expected_grad = None
        slots = [s for s, x in enumerate(case.flat) if x is t]
        param = [i for i, p in enumerate(case.params) if p is t]
        sources = [("slot", s) for s in slots if s not in case.none_grad]
        sources += [("param", i) for i in param if i not in case.none_param_grad]
        for j, spec in enumerate(flat_out_specs):
            if spec.kind == "const" or spec.source not in sources:
                continue
            part = contribution(case, spec, upstream_expected[j].double(), t.shape, t.dtype)
            part = part.expand(t.shape)
            expected_grad = part if expected_grad is None else expected_grad + part
        if expected_grad is None and sources:
            expected_grad = torch.zeros_like(t)  # only unused outputs: zeros, not None
        where = f"gradient of a {tuple(t.shape)} {t.dtype} input"
        if expected_grad is None:
            COUNTS["none_gradients"] += 1
            assert got is None, f"{where}: expected None, got {got}"
        else:
            COUNTS["gradients"] += 1
            assert got is not None, f"{where}: expected {expected_grad}, got None"
            assert_tensor_equal(got, expected_grad.to(t.dtype), where)


@SETTINGS
@given(case_strategy())
def _differential(case):
    run_case(case)


@pytest.mark.slow
def test_differential_against_the_tf_rule_oracle():
    before = COUNTS["cases"]
    _differential()
    assert COUNTS["cases"] - before >= MAX_EXAMPLES


# ------------------------------------------------------------------ the same under torch.func


def run_case_under_grad(case):
    """torch.func.grad of the same loss with respect to every float positional tensor: the
    custom rule must give what the oracle gives eagerly (None reads as zeros there)."""
    if case.mistake == "none_arg":
        case.args = case.args[:-1]
        case.flat = nest_flatten(case.args)
    case.mistake = None
    case.grad_enabled = True
    case.grad_fn_has_variables = case.grad_fn_has_variables or bool(case.params)
    log = new_log(transformed=True)
    decorated = custom_gradient(make_f(case, log))
    flat_out_specs = nest_flatten(case.outputs)
    targets = [t for t in unique_tensors(case.flat) if t.is_floating_point()]
    used = [j for j, e in enumerate(flat_out_specs) if j not in case.unused]
    COUNTS["func_grad_cases"] += 1

    def loss(*tensors):
        swap = {id(t): new for t, new in zip(targets, tensors, strict=True)}
        flat = [swap.get(id(x), x) if isinstance(x, torch.Tensor) else x for x in case.flat]
        out = nest_flatten(decorated(*nest_pack(case.args, flat), **case.kwargs))
        total = torch.zeros((), dtype=torch.float64)
        for j in used:
            if out[j].is_floating_point():
                total = total + (out[j].double() * case.weights[j]).sum()
        return total

    if not targets:
        return
    grads = torch.func.grad(loss, argnums=tuple(range(len(targets))))(*targets)
    # Every float output of the node depends on the transform's inputs: the rule runs once
    # when the loss uses any of them.
    uses_float_output = any(
        spec.kind == "const" or source_value(case, spec.source).is_floating_point()
        for spec in (flat_out_specs[j] for j in used)
    )
    assert log["grad_fn_calls"] == int(uses_float_output)
    for t, got in zip(targets, grads, strict=True):
        expected = torch.zeros(t.shape, dtype=torch.float64)
        slots = [s for s, x in enumerate(case.flat) if x is t and s not in case.none_grad]
        for j in used:
            spec = flat_out_specs[j]
            if spec.kind != "const" and spec.source[0] == "slot" and spec.source[1] in slots:
                w = torch.tensor(case.weights[j], dtype=torch.float64)
                expected = expected + contribution(case, spec, w, t.shape, torch.float64)
        COUNTS["func_grad_gradients"] += 1
        assert_tensor_equal(got, expected.to(t.dtype), f"torch.func.grad of a {t.dtype} input")


@settings(SETTINGS, max_examples=MAX_EXAMPLES_FUNC)
@given(case_strategy())
def _differential_under_grad(case):
    run_case_under_grad(case)


@pytest.mark.slow
def test_torch_func_grad_against_the_tf_rule_oracle():
    before = COUNTS["func_grad_cases"]
    _differential_under_grad()
    assert COUNTS["func_grad_cases"] - before >= MAX_EXAMPLES_FUNC
