"""The translation table of `python -m tf_compat_grad port`: one `Rule` per TensorFlow name.

A rule is data. A call `tf.NAME(...)` has its arguments bound to `params` (TensorFlow's
parameter order, so positional arguments land where TensorFlow puts them); the first `Variant`
whose template uses exactly the arguments given (less those in `drop` and the literal booleans
of `flags`) and whose `when` facts all hold is instantiated, with each `{param}` replaced by the
argument's (already translated) source. A call no variant fits is left as it is and flagged with
`otherwise`. A rule without `params` names a value: `tf.NAME` becomes `value`, and a call of it
keeps its arguments.

The facts a variant can require, besides which arguments are given:

- `P=True` / `P=False`: the flag P is that literal (a literal equal to its default counts as
  not given; a flag that is not a literal is flagged);
- `P=TEXT`: the string parameter P (of `strings`) is the literal 'TEXT', not its default;
- `P:number`: P is a literal number (`2`, `-0.5`);
- `P:literal`: P is a literal number or a nested list/tuple of them;
- `P:ints`: P is a literal int or a nested list/tuple of literal ints only;
- `P:axes`: P is a literal int or a non-empty list/tuple of literal ints;
- `P:axis`: P is a literal int;
- `P:size`: P is an indexed `.shape` (a Python int in torch), as `tf.shape(x)[0]` becomes;
- `P:intlike`: P is a Python int in both frameworks' eyes: a literal int, an indexed `.shape`,
  `len(...)`, or `+`, `-`, `*` of those;
- `P:nonzero`: P is a literal number other than 0;
- `P:name`: P is a name (a variable: its value is known at run time only);
- `branches`: not a fact but a mark: the template is a conditional expression whose branches
  each evaluate the arguments once, so none needs binding with `:=`;
- `subscripted`: the call is indexed, as in `tf.shape(x)[0]`, or is the shape argument of
  `tf.reshape`, `tf.ones`, `tf.zeros`, `tf.fill` (where a `torch.Size` serves as well).

A flag named in `dynamic` may also be an expression (a Python bool at run time); it is then an
ordinary argument, used by the variants that have its placeholder.

An argument a template uses more than once is evaluated once: when it is not a name or a
number, its first use becomes an assignment expression, `(_t1 := ...)`, and the others `_t1`.

`guide_table()` renders the table for docs/migrating_from_tensorflow.md (see
`.ci/port_table.py`; `tests/test_port.py` checks that the guide holds this rendering).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    """One translation: a Python expression with `{param}` placeholders, and the facts it needs."""

    template: str
    when: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rule:
    names: tuple[str, ...]  # relative to the tensorflow module: "reduce_sum", "math.reduce_sum"
    params: tuple[str, ...] | None = None  # TensorFlow's parameter order; None: a value
    variants: tuple[Variant, ...] = ()
    value: str = ""  # the translation of the bare name (a value rule, or a function passed along)
    flags: Mapping[str, bool] = field(default_factory=dict)  # literal booleans and their defaults
    dynamic: tuple[str, ...] = ()  # flags that may also be an expression, then a `{placeholder}`
    strings: Mapping[str, str] = field(default_factory=dict)  # literal strings and their defaults
    drop: tuple[str, ...] = ("name",)  # arguments without effect in torch
    refuse: Mapping[str, str] = field(default_factory=dict)  # fact -> why it is not translated
    note: str = ""  # semantics worth knowing, in the guide
    otherwise: str = ""  # why a call that no variant fits is left untranslated


def _v(template: str, *when: str) -> Variant:
    return Variant(template, frozenset(when))


def _unary(names: tuple[str, ...], param: str, target: str, note: str = "") -> Rule:
    """An elementwise function with the same semantics (gradient included) under both names."""
    return Rule(names, (param, "name"), (_v(f"{target}({{{param}}})"),), value=target, note=note)


def _reduction(name: str, target: str, note: str) -> Rule:
    """`tf.reduce_*`: `axis` -> `dim` (literal ints only: an empty list reduces nothing in TF
    but everything in torch), `keepdims` -> `keepdim`, no axis: over all elements."""
    x = "{input_tensor}"
    # a name's value is known at run time only: an empty sequence must reduce nothing
    empty = x + " if isinstance({axis}, (list, tuple)) and not {axis} else "
    return Rule(
        (f"reduce_{name}", f"math.reduce_{name}"),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(f"{target}({x}, dim={{axis}}, keepdim=True)", "keepdims=True", "axis:axes"),
            _v(f"{target}({x}, dim=None, keepdim=True)", "keepdims=True"),
            _v(f"{target}({x}, dim={{axis}}, keepdim={{keepdims}})", "axis:axes"),
            _v(f"{target}({x}, dim=None, keepdim={{keepdims}})"),
            _v(f"{target}({x}, dim={{axis}})", "axis:axes"),
            _v(f"{target}({x})"),
            _v(
                f"{empty}{target}({x}, dim={{axis}}, keepdim=True)",
                "keepdims=True",
                "axis:name",
                "branches",
            ),
            _v(
                f"{empty}{target}({x}, dim={{axis}}, keepdim={{keepdims}})",
                "axis:name",
                "branches",
            ),
            _v(f"{empty}{target}({x}, dim={{axis}})", "axis:name", "branches"),
        ),
        flags={"keepdims": False},
        dynamic=("keepdims",),
        note=note,
        otherwise="`axis` must be a name or a literal int or a non-empty list of literal ints "
        "(an empty list reduces nothing in TF but every dimension in torch)",
    )


def _activation(names: tuple[str, ...], target: str, note: str = "") -> Rule:
    return Rule(names, ("features", "name"), (_v(f"{target}({{features}})"),), note=note)


def _like(name: str) -> Rule:
    return Rule(
        (name,),
        ("input", "dtype", "name"),
        (
            _v(f"torch.{name}({{input}}, dtype={{dtype}})"),
            _v(f"torch.{name}({{input}})"),
        ),
    )


def _dtype(tf_name: str, torch_name: str = "") -> Rule:
    return Rule((tf_name,), value=f"torch.{torch_name or tf_name}")


def _flagged(names: tuple[str, ...], why: str) -> Rule:
    return Rule(names, (), otherwise=why)


_INTEGER_DIVISION = (
    "integer division and remainder: TF and torch differ in rounding and result dtypes for "
    "integer tensors; translate it by hand for the dtypes you use"
)
_NHWC = (
    "NHWC layout: TF's default data_format is channels-last, torch's convolutions and pools "
    "are channels-first; permute the tensors and the filter explicitly"
)

RULES: tuple[Rule, ...] = (
    # --- the library's decorators -------------------------------------------------------
    Rule(
        ("custom_gradient",),
        value="custom_gradient",
        note="f and grad_fn are kept as they are, `variables=` signatures included.",
    ),
    Rule(("recompute_grad",), value="recompute_grad"),
    Rule(("grad_pass_through",), value="grad_pass_through"),
    # --- tensors and variables ----------------------------------------------------------
    Rule(
        ("constant",),
        ("value", "dtype", "shape", "name"),
        (
            _v("torch.tensor({value}, dtype={dtype})", "value:literal"),
            _v("torch.tensor({value}, dtype=torch.int32)", "value:ints"),
            _v("torch.tensor({value})", "value:literal"),
            _v("torch.as_tensor({value}, dtype={dtype})"),
        ),
        note="Literal ints get `dtype=torch.int32`, TF's choice (torch's is int64); literal "
        "floats get torch's default dtype (float32 unless changed; TF: float32).",
        otherwise="`tf.constant` of a non-literal needs `dtype=` (TF infers int32 for Python "
        "ints, torch int64); `shape=` is not translated",
    ),
    Rule(
        ("Variable",),
        (
            "initial_value",
            "trainable",
            "validate_shape",
            "caching_device",
            "name",
            "variable_def",
            "dtype",
        ),
        (
            _v(
                "nn.Parameter(torch.tensor({initial_value}, dtype={dtype}))",
                "initial_value:literal",
            ),
            _v("nn.Parameter(torch.tensor({initial_value}))", "initial_value:literal"),
            _v("nn.Parameter(torch.as_tensor({initial_value}, dtype={dtype}))"),
            _v("nn.Parameter({initial_value})"),
        ),
        flags={"trainable": True},
        note="A trainable Parameter, found by `variables=` as TF finds the variable. "
        "`trainable=False` is not translated (use a buffer or a plain tensor).",
        otherwise="only `initial_value` and `dtype` are translated",
    ),
    Rule(
        ("cast", "dtypes.cast"),
        ("x", "dtype", "name"),
        (
            _v("torch.tensor({x}, dtype={dtype})", "x:intlike"),
            _v("torch.as_tensor({x}).to({dtype})"),
        ),
        note="Float to int truncates toward zero in both. The gradient is cast back, as in TF. "
        "A known Python int (`tf.shape(x)[i]`, now a size) becomes a tensor; `as_tensor` "
        "makes other Python numbers tensors as TF does (floats through float32, as TF's "
        "conversion) and returns a tensor itself.",
    ),
    Rule(
        ("identity",),
        ("input", "name"),
        (_v("{input}.clone()"),),
        note="A new tensor; the gradient passes through.",
    ),
    Rule(
        ("stop_gradient",),
        ("input", "name"),
        (_v("{input}.detach()"),),
        note="Inside grad_fn this also cuts the second derivative, as in TF.",
    ),
    _like("ones_like"),
    _like("zeros_like"),
    Rule(
        ("shape",),
        ("input", "out_type", "name"),
        (_v("{input}.shape", "subscripted"),),
        note="Only indexed, `tf.shape(x)[i]` -> `x.shape[i]` (a Python int), or as the shape "
        "of `tf.reshape`, `tf.ones`, `tf.zeros`, `tf.fill`.",
        otherwise="`tf.shape(x)` is translated only when indexed (`tf.shape(x)[i]` -> "
        "`x.shape[i]`): a whole `torch.Size` is a tuple, not a tensor (`* 2` repeats it)",
    ),
    Rule(
        ("convert_to_tensor",),
        ("value", "dtype", "dtype_hint", "name"),
        (
            _v("torch.tensor({value}, dtype={dtype})", "value:literal"),
            _v("torch.tensor({value}, dtype=torch.int32)", "value:ints"),
            _v("torch.tensor({value})", "value:literal"),
            _v("torch.as_tensor({value}, dtype={dtype})"),
        ),
        note="As `tf.constant` for literals; otherwise only with `dtype=`.",
        otherwise="`tf.convert_to_tensor` of a non-literal needs `dtype=`: TF makes Python ints "
        "int32 (torch int64); write `torch.as_tensor(value)` if it is a tensor already",
    ),
    Rule(
        ("nn.sigmoid_cross_entropy_with_logits",),
        ("labels", "logits", "name"),
        (
            _v(
                "torch.where({logits} >= 0, {logits}, 0.0) - {logits} * {labels} + "
                "torch.log1p(torch.exp(torch.where({logits} >= 0, -{logits}, {logits})))"
            ),
        ),
        note="TF's formula, `max(x, 0) - x * z + log1p(exp(-abs(x)))` with its `where`s (at "
        "x = 0 the gradient is 0.5 - z, as TF), labels differentiable too.",
    ),
    Rule(
        ("size",),
        ("input", "out_type", "name"),
        (
            _v("torch.tensor({input}.numel(), dtype={out_type})"),
            _v("torch.tensor({input}.numel(), dtype=torch.int32)"),
        ),
        note="An int32 tensor (unless `out_type=`), as TF.",
    ),
    Rule(
        ("rank",),
        ("input", "name"),
        (_v("torch.tensor({input}.dim(), dtype=torch.int32)"),),
        note="An int32 tensor, as TF.",
    ),
    Rule(("Tensor",), value="torch.Tensor", note="In annotations and `isinstance`."),
    Rule(("newaxis",), value="None", note="`x[:, tf.newaxis]` -> `x[:, None]`."),
    # --- dtypes -------------------------------------------------------------------------
    *(
        _dtype(name)
        for name in (
            "float16",
            "bfloat16",
            "float32",
            "float64",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "bool",
            "complex64",
            "complex128",
        )
    ),
    _dtype("half", "float16"),
    _dtype("double", "float64"),
    # --- reductions ---------------------------------------------------------------------
    _reduction("sum", "torch.sum", "No axis: the sum of all elements."),
    _reduction("mean", "torch.mean", "Integer tensors: TF divides in integers, torch refuses."),
    _reduction("max", "torch.amax", "Ties share the gradient equally, in both."),
    _reduction("min", "torch.amin", "Ties share the gradient equally, in both."),
    Rule(
        ("reduce_prod", "math.reduce_prod"),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(
                "torch.prod({input_tensor}, dim={axis}, keepdim=True)", "keepdims=True", "axis:axis"
            ),
            _v("torch.prod({input_tensor}, dim={axis})", "axis:axis"),
            _v("torch.prod({input_tensor})"),
        ),
        flags={"keepdims": False},
        note="Zeros in the input get the exact gradient in both. The second derivative at "
        "a zero: TF gives 0, torch the true value.",
        otherwise="`torch.prod` reduces one literal int axis at a time; `keepdims=True` needs "
        "an axis",
    ),
    # --- elementwise ---------------------------------------------------------------------
    _unary(("exp", "math.exp"), "x", "torch.exp"),
    _unary(("math.log", "log"), "x", "torch.log"),
    _unary(("math.log1p",), "x", "torch.log1p"),
    _unary(("math.expm1",), "x", "torch.expm1"),
    _unary(
        ("sqrt", "math.sqrt"),
        "x",
        "torch.sqrt",
        "At x = 0 with a zero upstream gradient TF's gradient is 0, torch's NaN (0 * inf): "
        "it shows in second derivatives through a sqrt at 0.",
    ),
    _unary(("square", "math.square"), "x", "torch.square"),
    _unary(("abs", "math.abs"), "x", "torch.abs", "The gradient at 0 is 0 in both."),
    _unary(("sign", "math.sign"), "x", "torch.sign", "sign(0) = 0; the gradient is 0, in both."),
    _unary(
        ("round", "math.round"),
        "x",
        "torch.round",
        "Half to even in both (`round(2.5) = 2`); no gradient (TF: None, torch: zeros).",
    ),
    _unary(("tanh", "math.tanh", "nn.tanh"), "x", "torch.tanh"),
    _unary(("nn.relu",), "features", "torch.relu", "The gradient at 0 is 0 in both."),
    _unary(("sigmoid", "math.sigmoid", "nn.sigmoid"), "x", "torch.sigmoid"),
    Rule(
        ("nn.softplus", "math.softplus"),
        ("features", "name"),
        (_v("torch.logaddexp({features}, torch.zeros_like({features}))"),),
        note="`log(1 + exp(x))` for every x: `torch.nn.functional.softplus` returns x above 20, "
        "where TF's float64 softplus still adds `exp(-x)`.",
    ),
    Rule(
        ("maximum", "math.maximum"),
        ("x", "y", "name"),
        (
            _v("torch.where({x} >= {y}, {x}, {y})", "x:number"),
            _v("torch.where(({x} >= {y}) | {x}.isnan(), {x}, {y})"),
        ),
        note="On ties TF gives the whole gradient to x; `torch.maximum` would split it, and "
        "`torch.clamp`'s gradient at its bound differs between torch releases. A NaN in x or y "
        "gives NaN, as in TF; the gradient at a NaN x goes to x here, to y in TF.",
    ),
    Rule(
        ("minimum", "math.minimum"),
        ("x", "y", "name"),
        (
            _v("torch.where({x} <= {y}, {x}, {y})", "x:number"),
            _v("torch.where(({x} <= {y}) | {x}.isnan(), {x}, {y})"),
        ),
        note="On ties TF gives the whole gradient to x; `torch.minimum` would split it. NaN: "
        "as for `tf.maximum`.",
    ),
    *(
        Rule((tf_name, f"math.{tf_name}"), ("x", "y", "name"), (_v(f"torch.{op}({{x}}, {{y}})"),))
        for tf_name, op in (
            ("equal", "eq"),
            ("not_equal", "ne"),
            ("less", "lt"),
            ("less_equal", "le"),
            ("greater", "gt"),
            ("greater_equal", "ge"),
        )
    ),
    Rule(
        ("clip_by_value",),
        ("t", "clip_value_min", "clip_value_max", "name"),
        (
            _v(
                "torch.where({t} < {clip_value_min}, {clip_value_min}, "
                "torch.where({t} > {clip_value_max}, {clip_value_max}, {t}))"
            ),
        ),
        note="The gradient passes at the bounds, as in TF (`torch.clamp` passes it there up to "
        "torch 2.13 and not from 2.14).",
    ),
    Rule(
        ("clip_by_norm",),
        ("t", "clip_norm", "axes", "name"),
        (
            _v(
                "{t} * {clip_norm} / torch.where("
                "torch.linalg.vector_norm({t}, dim={axes}, keepdim=True) >= {clip_norm}, "
                "torch.linalg.vector_norm({t}, dim={axes}, keepdim=True), {clip_norm})",
                "axes:axes",
            ),
            _v(
                "{t} * {clip_norm} / torch.where(torch.linalg.vector_norm({t}) >= {clip_norm}, "
                "torch.linalg.vector_norm({t}), {clip_norm})"
            ),
        ),
        note="TF's formula, `t * clip_norm / max(norm, clip_norm)`, with the L2 norm over all "
        "elements (or `axes`) and a tie's gradient to the norm, as TF's `maximum` gives it; an "
        "all-zero t stays zero.",
        otherwise="`axes` must be a literal int or a non-empty list of literal ints",
    ),
    Rule(
        ("math.divide_no_nan", "div_no_nan"),
        ("x", "y", "name"),
        (_v("torch.where({y} == 0, 0.0, {x} / torch.where({y} == 0, 1.0, {y}))"),),
        note="0 where y == 0, with a zero (not NaN) gradient there.",
    ),
    Rule(
        ("where",),
        ("condition", "x", "y", "name"),
        (
            _v("torch.where({condition}, {x}, {y})"),
            _v("torch.nonzero({condition})"),
        ),
        note="One argument: the coordinates of the true elements, `[N, rank]` int64, in both.",
    ),
    _reduction("any", "torch.any", "Boolean tensors."),
    _reduction("all", "torch.all", "Boolean tensors."),
    Rule(
        ("reduce_logsumexp", "math.reduce_logsumexp"),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(
                "torch.logsumexp({input_tensor}, dim={axis}, keepdim=True)",
                "keepdims=True",
                "axis:axes",
            ),
            _v("torch.logsumexp({input_tensor}, dim={axis}, keepdim={keepdims})", "axis:axes"),
            _v("torch.logsumexp({input_tensor}, dim={axis})", "axis:axes"),
            _v("torch.logsumexp({input_tensor}.flatten(), dim=0)"),
        ),
        flags={"keepdims": False},
        dynamic=("keepdims",),
        note="No axis: over all elements. Both subtract the maximum first.",
        otherwise="`axis` must be a literal int or a non-empty list of literal ints; "
        "`keepdims=True` needs an axis",
    ),
    Rule(
        ("math.reduce_variance",),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(
                "torch.mean(torch.square({input_tensor} - torch.mean({input_tensor}, dim={axis}, "
                "keepdim=True)), dim={axis}, keepdim=True)",
                "keepdims=True",
                "axis:axes",
            ),
            _v(
                "torch.mean(torch.square({input_tensor} - torch.mean({input_tensor}, dim={axis}, "
                "keepdim=True)), dim={axis})",
                "axis:axes",
            ),
            _v("torch.mean(torch.square({input_tensor} - torch.mean({input_tensor})))"),
        ),
        flags={"keepdims": False},
        note="TF's formula, the mean of squared deviations (population variance), so that "
        "second derivatives match too.",
        otherwise="`axis` must be a literal int or a non-empty list of literal ints; "
        "`keepdims=True` needs an axis",
    ),
    Rule(
        ("math.reduce_std",),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(
                "torch.sqrt(torch.mean(torch.square({input_tensor} - torch.mean({input_tensor}, "
                "dim={axis}, keepdim=True)), dim={axis}, keepdim=True))",
                "keepdims=True",
                "axis:axes",
            ),
            _v(
                "torch.sqrt(torch.mean(torch.square({input_tensor} - torch.mean({input_tensor}, "
                "dim={axis}, keepdim=True)), dim={axis}))",
                "axis:axes",
            ),
            _v("torch.sqrt(torch.mean(torch.square({input_tensor} - torch.mean({input_tensor}))))"),
        ),
        flags={"keepdims": False},
        note="The square root of `tf.math.reduce_variance`'s formula (`tf.sqrt`'s note applies "
        "at a zero variance).",
        otherwise="`axis` must be a literal int or a non-empty list of literal ints; "
        "`keepdims=True` needs an axis",
    ),
    Rule(
        ("nn.moments",),
        ("x", "axes", "shift", "keepdims", "name"),
        (
            _v(
                "(torch.mean({x}, dim={axes}, keepdim=True), torch.mean(torch.square({x} - "
                "torch.mean({x}, dim={axes}, keepdim=True).detach()), dim={axes}, keepdim=True))",
                "keepdims=True",
                "axes:axes",
            ),
            _v(
                "(torch.mean({x}, dim={axes}), torch.mean(torch.square({x} - "
                "torch.mean({x}, dim={axes}, keepdim=True).detach()), dim={axes}))",
                "axes:axes",
            ),
        ),
        flags={"keepdims": False},
        note="(mean, variance) with TF's formula: the variance's mean is a stopped gradient, "
        "which shows in second derivatives. float16 inputs: TF computes in float32, this does "
        "not.",
        otherwise="`axes` must be a literal list of ints; `shift` is not translated",
    ),
    Rule(
        ("math.cumsum", "cumsum"),
        ("x", "axis", "exclusive", "reverse", "name"),
        (
            _v(
                "torch.flip(torch.cumsum(torch.flip({x}, [{axis}]), dim={axis}), [{axis}])",
                "reverse=True",
                "axis:axis",
            ),
            _v("torch.cumsum({x}, dim={axis})", "axis:axis"),
            _v("torch.cumsum({x}, dim=0)"),
        ),
        flags={"exclusive": False, "reverse": False},
        note="No axis: axis 0, as TF.",
        otherwise="`axis` must be a literal int (`reverse=True` needs one); `exclusive=True` "
        "is not translated",
    ),
    # --- elementwise, more -------------------------------------------------------------------
    _unary(("negative", "math.negative"), "x", "torch.neg"),
    _unary(("math.sin", "sin"), "x", "torch.sin"),
    _unary(("math.cos", "cos"), "x", "torch.cos"),
    _unary(("math.tan",), "x", "torch.tan"),
    _unary(("math.atan", "atan"), "x", "torch.atan"),
    _unary(("math.asin", "asin"), "x", "torch.asin"),
    _unary(("math.acos", "acos"), "x", "torch.acos"),
    _unary(("math.sinh",), "x", "torch.sinh"),
    _unary(("math.cosh",), "x", "torch.cosh"),
    _unary(("math.lgamma",), "x", "torch.lgamma"),
    _unary(("math.digamma",), "x", "torch.digamma"),
    Rule(
        ("math.atan2", "atan2"),
        ("y", "x", "name"),
        (_v("torch.atan2({y}, {x})"),),
        note="y first, in both.",
    ),
    _activation(("math.softsign", "nn.softsign"), "torch.nn.functional.softsign"),
    _unary(("math.erf",), "x", "torch.erf"),
    _unary(("math.rsqrt",), "x", "torch.rsqrt"),
    _unary(("math.floor", "floor"), "x", "torch.floor", "No gradient (TF: None, torch: zeros)."),
    _unary(("math.ceil",), "x", "torch.ceil", "No gradient (TF: None, torch: zeros)."),
    Rule(
        ("math.log_sigmoid",),
        ("x", "name"),
        (_v("-torch.logaddexp(-{x}, torch.zeros_like({x}))"),),
        note="TF's `-softplus(-x)`, as `tf.nn.softplus` is translated.",
    ),
    _unary(("math.reciprocal",), "x", "torch.reciprocal"),
    _unary(("math.is_finite",), "x", "torch.isfinite"),
    _unary(("math.is_nan",), "x", "torch.isnan"),
    _unary(("math.is_inf",), "x", "torch.isinf"),
    _unary(("logical_not", "math.logical_not"), "x", "torch.logical_not"),
    *(
        Rule(
            (tf_name, f"math.{tf_name}"),
            ("x", "y", "name"),
            (_v(f"torch.{tf_name}({{x}}, {{y}})"),),
        )
        for tf_name in ("logical_and", "logical_or")
    ),
    Rule(("math.logical_xor",), ("x", "y", "name"), (_v("torch.logical_xor({x}, {y})"),)),
    Rule(
        ("multiply", "math.multiply"),
        ("x", "y", "name"),
        (_v("torch.mul({x}, {y})"),),
        note="x must be a tensor in torch (two Python numbers raise instead of giving a tensor).",
    ),
    Rule(
        ("add", "math.add"),
        ("x", "y", "name"),
        (_v("torch.add({x}, {y})"),),
        note="x must be a tensor in torch, as for `tf.multiply`.",
    ),
    Rule(
        ("subtract", "math.subtract"),
        ("x", "y", "name"),
        (_v("torch.sub({x}, {y})"),),
        note="x must be a tensor in torch, as for `tf.multiply`.",
    ),
    Rule(
        ("math.scalar_mul", "scalar_mul"),
        ("scalar", "x", "name"),
        (_v("{scalar} * {x}"),),
    ),
    Rule(
        ("math.add_n", "add_n"),
        ("inputs", "name"),
        (_v("torch.stack({inputs}).sum(dim=0)"),),
        note="Tensors of one shape, as TF requires; each gets the whole gradient.",
    ),
    Rule(
        ("math.squared_difference",),
        ("x", "y", "name"),
        (_v("torch.square({x} - {y})"),),
    ),
    Rule(
        ("pow", "math.pow"),
        ("x", "y", "name"),
        (_v("torch.pow({x}, {y})", "y:nonzero"),),
        note="A literal exponent other than 0 only. TF's gradient with respect to a tensor "
        "exponent is 0 where x <= 0 (torch's is NaN or -inf there), and at x = 0 with exponent 0 "
        "TF's gradient is NaN (torch's 0).",
        otherwise="the exponent must be a literal number other than 0 (where x <= 0 TF's "
        "gradient for a tensor exponent is 0, torch's NaN; `pow(0, 0)`'s gradient: TF NaN, "
        "torch 0)",
    ),
    # --- activations ---------------------------------------------------------------------------
    Rule(
        ("nn.softmax", "math.softmax"),
        ("logits", "axis", "name"),
        (
            _v("torch.softmax({logits}, dim={axis})", "axis:axis"),
            _v("torch.softmax({logits}, dim=-1)"),
        ),
        note="No axis: the last, in both.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("nn.log_softmax", "math.log_softmax"),
        ("logits", "axis", "name"),
        (
            _v("torch.log_softmax({logits}, dim={axis})", "axis:axis"),
            _v("torch.log_softmax({logits}, dim=-1)"),
        ),
        note="No axis: the last, in both.",
        otherwise="`axis` must be a literal int",
    ),
    _activation(("nn.elu",), "torch.nn.functional.elu", "The gradient at 0 is 1, in both."),
    Rule(
        ("nn.selu",),
        ("features", "name"),
        (
            _v(
                "torch.where({features} < 0, 1.7580993408473768 * (torch.exp({features}) - 1.0), "
                "1.0507009873554805 * {features})"
            ),
        ),
        note="TF's kernel: at 0 the gradient is `scale` (the positive branch), where "
        "`torch.selu`'s is `scale * alpha`.",
    ),
    _activation(
        ("nn.relu6",), "torch.nn.functional.relu6", "The gradient at 0 and at 6 is 0, in both."
    ),
    Rule(
        ("nn.leaky_relu",),
        ("features", "alpha", "name"),
        (
            _v(
                "torch.nn.functional.leaky_relu("
                "{features}, torch.tensor({alpha}, dtype=torch.float32).item())"
            ),
            _v("torch.nn.functional.leaky_relu({features}, 0.20000000298023224)"),
        ),
        note="TF keeps alpha as a float32 attribute, also for float64 features: the slope is "
        "alpha rounded to float32 (`0.1` is 0.10000000149...). TF's default alpha is 0.2 "
        "(torch's negative_slope 0.01); the gradient at 0 is alpha, in both.",
    ),
    Rule(
        ("nn.gelu",),
        ("features", "approximate", "name"),
        (
            _v(
                "0.5 * {features} * (1.0 + torch.tanh(0.7978845608028654 * ({features} + "
                "0.044714998453855515 * torch.pow({features}, 3))))",
                "approximate=True",
            ),
            _v("0.5 * {features} * (1.0 + torch.erf({features} * 0.7071067690849304))"),
        ),
        flags={"approximate": False},
        note="TF's formulas, whose constants 1/sqrt(2) (erf form, the default) and 0.044715 "
        "(tanh form, `approximate=True`) are rounded to float32 also for float64 features: "
        "`torch.nn.functional.gelu` differs from TF by about 1e-9 in float64.",
    ),
    Rule(
        ("nn.silu", "nn.swish"),
        ("features", "beta", "name"),
        (_v("torch.nn.functional.silu({features})"),),
        otherwise="`beta` is not translated",
    ),
    Rule(
        ("math.l2_normalize", "nn.l2_normalize", "linalg.l2_normalize"),
        ("x", "axis", "epsilon", "name", "dim"),
        (
            _v(
                "{x} * torch.rsqrt(torch.where("
                "torch.sum(torch.square({x}), dim={axis}, keepdim=True) >= {epsilon}, "
                "torch.sum(torch.square({x}), dim={axis}, keepdim=True), {epsilon}))",
                "axis:axes",
            ),
            _v(
                "{x} * torch.rsqrt(torch.where("
                "torch.sum(torch.square({x}), dim={axis}, keepdim=True) >= 1e-12, "
                "torch.sum(torch.square({x}), dim={axis}, keepdim=True), 1e-12))",
                "axis:axes",
            ),
            _v(
                "{x} * torch.rsqrt(torch.where("
                "torch.sum(torch.square({x}), dim=None, keepdim=True) >= {epsilon}, "
                "torch.sum(torch.square({x}), dim=None, keepdim=True), {epsilon}))"
            ),
            _v(
                "{x} * torch.rsqrt(torch.where("
                "torch.sum(torch.square({x}), dim=None, keepdim=True) >= 1e-12, "
                "torch.sum(torch.square({x}), dim=None, keepdim=True), 1e-12))"
            ),
        ),
        note="TF's formula, `x * rsqrt(max(sum(x**2), epsilon))`, epsilon 1e-12 by default: "
        "epsilon bounds the squared norm, not the norm; a tie's gradient goes to the sum, as "
        "TF's `maximum` gives it (`torch.clamp`'s changed in torch 2.14).",
        otherwise="`axis` must be a literal int or a non-empty list of literal ints",
    ),
    Rule(
        ("norm", "linalg.norm"),
        ("tensor", "ord", "axis", "keepdims", "name"),
        (
            _v(
                "torch.sqrt(torch.sum(torch.square({tensor}), dim={axis}, keepdim=True))",
                "keepdims=True",
                "axis:axes",
            ),
            _v(
                "torch.sqrt(torch.sum(torch.square({tensor}), dim=None, keepdim=True))",
                "keepdims=True",
            ),
            _v("torch.sqrt(torch.sum(torch.square({tensor}), dim={axis}))", "axis:axes"),
            _v("torch.sqrt(torch.sum(torch.square({tensor})))"),
        ),
        flags={"keepdims": False},
        note="The Euclidean (Frobenius over two axes) norm as TF computes it, the square root "
        "of the sum of squares: at a zero vector the gradient is NaN in both "
        "(`torch.linalg.vector_norm` would give 0).",
        otherwise="only the default `ord` (Euclidean) with a literal `axis` is translated",
    ),
    # --- indices and construction ------------------------------------------------------------
    Rule(
        ("argmax", "math.argmax"),
        ("input", "axis", "output_type", "name"),
        (
            _v("torch.argmax({input}, dim={axis}).to({output_type})", "axis:axis"),
            _v("torch.argmax({input}, dim={axis})", "axis:axis"),
            _v("torch.argmax({input}, dim=0)"),
        ),
        note="No axis: axis 0 in TF (torch would flatten). int64, the first of ties, in both.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("argmin", "math.argmin"),
        ("input", "axis", "output_type", "name"),
        (
            _v("torch.argmin({input}, dim={axis}).to({output_type})", "axis:axis"),
            _v("torch.argmin({input}, dim={axis})", "axis:axis"),
            _v("torch.argmin({input}, dim=0)"),
        ),
        note="As `tf.argmax`.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("one_hot",),
        ("indices", "depth", "on_value", "off_value", "axis", "dtype", "name"),
        (
            _v("torch.nn.functional.one_hot({indices}.long(), {depth}).to({dtype})"),
            _v("torch.nn.functional.one_hot({indices}.long(), {depth}).to(torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF. An index outside [0, depth) gives a zero row "
        "in TF and an error in torch.",
        otherwise="only `indices`, `depth` and `dtype` are translated",
    ),
    Rule(
        ("gather",),
        ("params", "indices", "validate_indices", "axis", "batch_dims", "name"),
        (_v("{params}[torch.as_tensor({indices}).long()]"),),
        note="Axis 0 only. A negative index is an error in TF, counts from the end in torch.",
        otherwise="only axis 0 (no `axis`, `batch_dims`) is translated",
    ),
    Rule(("tile",), ("input", "multiples", "name"), (_v("torch.tile({input}, {multiples})"),)),
    Rule(
        ("range",),
        ("start", "limit", "delta", "dtype", "name"),
        (
            _v("torch.arange({start}, dtype={dtype})"),
            _v("torch.arange({start}, {limit}, dtype={dtype})"),
            _v("torch.arange({start}, {limit}, {delta}, dtype={dtype})", "delta:intlike"),
            _v("torch.arange({start}, dtype=torch.int32)", "start:intlike"),
            _v(
                "torch.arange({start}, {limit}, dtype=torch.int32)",
                "start:intlike",
                "limit:intlike",
            ),
            _v(
                "torch.arange({start}, {limit}, {delta}, dtype=torch.int32)",
                "start:intlike",
                "limit:intlike",
                "delta:intlike",
            ),
        ),
        note="Without `dtype=`, integer arguments only (literal ints, sizes, names assigned "
        "only those in the function): int32, as TF (torch's default is int64). With `dtype=`, "
        "an integer step.",
        otherwise="without `dtype=` only integer arguments (literal ints, sizes, names assigned "
        "only those) are translated: TF infers int32 or float32 from them; a float step "
        "accumulates differently",
    ),
    Rule(
        ("ones",),
        ("shape", "dtype", "name"),
        (_v("torch.ones({shape}, dtype={dtype})"), _v("torch.ones({shape}, dtype=torch.float32)")),
        note="float32 unless `dtype=`, as TF.",
    ),
    Rule(
        ("zeros",),
        ("shape", "dtype", "name"),
        (
            _v("torch.zeros({shape}, dtype={dtype})"),
            _v("torch.zeros({shape}, dtype=torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF.",
    ),
    Rule(
        ("fill",),
        ("dims", "value", "name"),
        (
            _v("torch.full({dims}, {value}, dtype=torch.int32)", "value:ints"),
            _v("torch.full({dims}, {value}, dtype=torch.float32)", "value:number"),
        ),
        note="A literal value: int32 or float32, as TF infers.",
        otherwise="only a literal number `value` is translated (TF infers the dtype from it)",
    ),
    # --- shapes and linear algebra ----------------------------------------------------------
    Rule(
        ("matmul", "linalg.matmul"),
        ("a", "b", "transpose_a", "transpose_b"),
        (
            _v("torch.matmul({a}.mT, {b}.mT)", "transpose_a=True", "transpose_b=True"),
            _v("torch.matmul({a}.mT, {b})", "transpose_a=True"),
            _v("torch.matmul({a}, {b}.mT)", "transpose_b=True"),
            _v("torch.matmul({a}, {b})"),
        ),
        flags={"transpose_a": False, "transpose_b": False},
        note="`transpose_a`/`transpose_b` transpose the last two dimensions (`.mT`).",
        otherwise="only `transpose_a` and `transpose_b` are translated (not `adjoint_*`, "
        "`*_is_sparse`, `output_type`)",
    ),
    _unary(("linalg.inv",), "input", "torch.linalg.inv"),
    Rule(
        ("linalg.trace", "trace"),
        ("x", "name"),
        (_v("torch.diagonal({x}, dim1=-2, dim2=-1).sum(-1)"),),
        note="Of the last two dimensions (batched), as TF.",
    ),
    Rule(
        ("linalg.diag_part",),
        ("input", "name", "k", "padding_value", "align"),
        (_v("torch.diagonal({input}, dim1=-2, dim2=-1)"),),
        note="The main diagonal of the last two dimensions.",
        otherwise="only the main diagonal (no `k`, `padding_value`, `align`) is translated",
    ),
    Rule(
        ("linalg.diag",),
        ("diagonal", "name", "k", "num_rows", "num_cols", "padding_value", "align"),
        (_v("torch.diag_embed({diagonal})"),),
        note="Batched: the last dimension becomes a diagonal matrix.",
        otherwise="only the main diagonal (no `k`, `num_rows`, ...) is translated",
    ),
    Rule(
        ("linalg.matrix_transpose", "linalg.transpose"),
        ("a", "name", "conjugate"),
        (_v("{a}.mT"),),
        flags={"conjugate": False},
        otherwise="`conjugate=True` is not translated",
    ),
    Rule(
        ("linalg.solve",),
        ("matrix", "rhs", "adjoint", "name"),
        (
            _v("torch.linalg.solve({matrix}.mT, {rhs})", "adjoint=True"),
            _v("torch.linalg.solve({matrix}, {rhs})"),
        ),
        flags={"adjoint": False},
        note="`rhs` is a matrix (`[..., M, K]`) in both.",
    ),
    Rule(
        ("eye", "linalg.eye"),
        ("num_rows", "num_columns", "batch_shape", "dtype", "name"),
        (
            _v("torch.eye({num_rows}, {num_columns}, dtype={dtype})"),
            _v("torch.eye({num_rows}, dtype={dtype})"),
            _v("torch.eye({num_rows}, {num_columns}, dtype=torch.float32)"),
            _v("torch.eye({num_rows}, dtype=torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF.",
        otherwise="`batch_shape` is not translated",
    ),
    Rule(
        ("reshape",),
        ("tensor", "shape", "name"),
        (_v("torch.reshape({tensor}, {shape})"),),
        note="A whole `tf.shape(x)` as the shape becomes `x.shape` (also in `tf.ones`, "
        "`tf.zeros`, `tf.fill`).",
    ),
    Rule(
        ("einsum", "linalg.einsum"),
        value="torch.einsum",
        note="The same equations (ellipsis included); the operands are passed as they are.",
    ),
    Rule(
        ("transpose",),
        ("a", "perm", "conjugate", "name"),
        (
            _v("torch.permute({a}, {perm})"),
            _v("{a}.permute(*range({a}.dim() - 1, -1, -1))"),
        ),
        flags={"conjugate": False},
        note="Without `perm`, all dimensions are reversed, as in TF.",
        otherwise="`conjugate=True` is not translated",
    ),
    Rule(("concat",), ("values", "axis", "name"), (_v("torch.cat({values}, dim={axis})"),)),
    Rule(
        ("stack",),
        ("values", "axis", "name"),
        (_v("torch.stack({values}, dim={axis})"), _v("torch.stack({values})")),
    ),
    Rule(
        ("broadcast_to",),
        ("input", "shape", "name"),
        (_v("torch.broadcast_to({input}, {shape})"),),
        note="The gradient sums over the broadcast dimensions, in both.",
    ),
    Rule(
        ("tensordot", "linalg.tensordot"),
        ("a", "b", "axes", "name"),
        (_v("torch.tensordot({a}, {b}, dims={axes})"),),
        note="`axes` an int (the last N of a with the first N of b) or two lists, in both.",
    ),
    Rule(
        ("pad",),
        ("tensor", "paddings", "mode", "constant_values", "name"),
        (
            _v(
                "torch.nn.functional.pad({tensor}, [p for pair in reversed({paddings}) "
                "for p in pair], value={constant_values})"
            ),
            _v(
                "torch.nn.functional.pad({tensor}, [p for pair in reversed({paddings}) "
                "for p in pair])"
            ),
        ),
        strings={"mode": "CONSTANT"},
        note="TF's `[[before, after], ...]` from the first dimension becomes torch's flat list "
        "from the last. Constant mode only.",
        otherwise="only the default CONSTANT mode is translated (REFLECT and SYMMETRIC differ "
        "from torch's modes at the edges)",
    ),
    Rule(
        ("nn.l2_loss",),
        ("t", "name"),
        (_v("torch.sum(torch.square({t})) / 2"),),
        note="`sum(t ** 2) / 2`, as TF.",
    ),
    Rule(
        ("nn.bias_add",),
        ("value", "bias", "data_format", "name"),
        (_v("{value} + {bias}"),),
        note="The default data_format adds the bias along the last dimension: broadcasting.",
        otherwise="`data_format=` is not translated (NCHW adds along dimension 1)",
    ),
    Rule(
        ("nn.embedding_lookup",),
        ("params", "ids", "max_norm", "name"),
        (_v("{params}[torch.as_tensor({ids}).long()]"),),
        note="One params tensor (a sharded list is an error in torch), as `tf.gather`.",
        otherwise="`max_norm` is not translated",
    ),
    Rule(
        ("sort",),
        ("values", "axis", "direction", "name"),
        (
            _v(
                "torch.sort({values}, dim={axis}, descending=True, stable=True).values",
                "direction=DESCENDING",
                "axis:axis",
            ),
            _v(
                "torch.sort({values}, dim=-1, descending=True, stable=True).values",
                "direction=DESCENDING",
            ),
            _v("torch.sort({values}, dim={axis}, stable=True).values", "axis:axis"),
            _v("torch.sort({values}, dim=-1, stable=True).values"),
        ),
        strings={"direction": "ASCENDING"},
        note="Stable, so that tied values take their gradients in TF's order (TF sorts with "
        "`top_k`, lower indices first).",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("unstack",),
        ("value", "num", "axis", "name"),
        (
            _v("list(torch.unbind({value}, dim={axis}))", "axis:axis"),
            _v("list(torch.unbind({value}))"),
        ),
        note="A list, as TF.",
        otherwise="`axis` must be a literal int; `num` is not translated",
    ),
    Rule(
        ("expand_dims",),
        ("input", "axis", "name"),
        (_v("torch.unsqueeze({input}, {axis})"),),
    ),
    Rule(
        ("squeeze",),
        ("input", "axis", "name"),
        (_v("torch.squeeze({input}, dim={axis})"), _v("torch.squeeze({input})")),
        note="TF raises for an axis whose size is not 1; torch leaves it.",
    ),
    # --- not translated, with the reason ----------------------------------------------------
    Rule(
        ("GradientTape",),
        (),
        note="Translated in one pattern: `with tf.GradientTape() as tape:` (`persistent=` "
        "allowed) opening with `tape.watch(NAME or [NAMES])` (or none, for module-level "
        "`tf.Variable`s), the block reading only watched names, names it assigns, parameters "
        "and module-level names (at module level: functions, imports, variables), and the tape "
        "used after it only as `tape.gradient(target, NAME or [NAMES], output_gradients=)` with "
        "watched names, names the block assigns or variables as sources: "
        "`with torch.enable_grad():`, `x_watched = x if x.requires_grad else "
        "x.detach().requires_grad_()`, and `torch.autograd.grad(target, [x_watched], "
        "grad_outputs=output_gradients or ones, create_graph=True, allow_unused=True)`, "
        "differentiable again as TF's under an outer tape. An unconnected target raises in "
        "torch (TF: None).",
        otherwise="only `with tf.GradientTape() as tape:` in the pattern of the note is translated",
    ),
    Rule(
        ("function",),
        ("func", "input_signature", "autograph", "jit_compile", "reduce_retracing"),
        (_v("{func}"),),
        note="A bare `@tf.function` decorator is removed and `tf.function(f)` becomes `f`: "
        "the function runs eagerly, with the numbers of TF's eager mode (autograph keeps "
        "Python semantics); `torch.compile(fn, fullgraph=True)` is torch's counterpart. Any "
        "argument (`input_signature=`, `jit_compile=`, ...) is not translated.",
        otherwise="only a bare `@tf.function` or `tf.function(f)` is translated",
    ),
    _flagged(
        (
            "random.normal",
            "random.uniform",
            "random.truncated_normal",
            "random.categorical",
            "random.shuffle",
            "random.set_seed",
        ),
        "random numbers: TF's and torch's generators give different numbers for the same "
        "seed; use torch's (`torch.randn`, `torch.rand`, ...) and compare statistics, not values",
    ),
    _flagged(
        (
            "math.floordiv",
            "math.floormod",
            "math.truncatediv",
            "math.truncatemod",
            "math.mod",
            "math.divide",
            "math.truediv",
            "realdiv",
            "floordiv",
            "truediv",
        ),
        _INTEGER_DIVISION,
    ),
    _flagged(
        (
            "nn.conv1d",
            "nn.conv2d",
            "nn.conv3d",
            "nn.depthwise_conv2d",
            "nn.max_pool",
            "nn.max_pool1d",
            "nn.max_pool2d",
            "nn.avg_pool",
            "nn.avg_pool1d",
            "nn.avg_pool2d",
        ),
        _NHWC,
    ),
)

TABLE: dict[str, Rule] = {name: rule for rule in RULES for name in rule.names}

# The names a template may use and the import each one needs.
IMPORTS: dict[str, str] = {
    "torch": "import torch",
    "nn": "from torch import nn",
    "custom_gradient": "from tf_compat_grad import custom_gradient",
    "recompute_grad": "from tf_compat_grad import recompute_grad",
    "grad_pass_through": "from tf_compat_grad import grad_pass_through",
}

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def placeholders(template: str) -> list[str]:
    """The parameters a template uses, once per use.

    >>> placeholders("torch.clamp({x}, min={y})")
    ['x', 'y']
    """
    return _PLACEHOLDER.findall(template)


def _shown(template: str) -> str:
    return "`" + _PLACEHOLDER.sub(r"\1", template) + "`"


_FACT_WORDS = {
    "number": "a literal number",
    "literal": "a literal",
    "ints": "literal ints",
    "axes": "literal int(s)",
    "axis": "a literal int",
    "size": "an indexed shape",
    "intlike": "an int",
    "nonzero": "a literal number other than 0",
    "name": "a name",
}


def _condition(variant: Variant) -> str:
    """When a variant applies, in words: `if axis is literal int(s), keepdims=True`."""
    words = []
    for fact in sorted(variant.when - {"subscripted", "branches"}):
        param, _, kind = fact.partition(":")
        words.append(f"{param} is {_FACT_WORDS[kind]}" if kind else fact)
    return f" if {', '.join(words)}" if words else ""


GUIDE_START = (
    "<!-- port-table:start (generated by .ci/port_table.py from tf_compat_grad/_port/_table.py) -->"
)
GUIDE_END = "<!-- port-table:end -->"


def guide_table() -> str:
    """The table as Markdown, one row per rule: TensorFlow names, PyTorch, note."""
    rows = ["| TensorFlow | PyTorch | Note |", "|---|---|---|"]
    for rule in RULES:
        names = ", ".join(f"`tf.{name}`" for name in rule.names)
        if rule.params is None:
            torch = f"`{rule.value}`"
        elif not rule.variants and rule.note:  # translated by the transformer, see the note
            torch = "in one pattern, in the note; otherwise not translated"
        elif not rule.variants:
            torch = "not translated: " + rule.otherwise
        else:
            shown = [_shown(v.template) + _condition(v) for v in rule.variants]
            torch = "<br>".join(shown)
        rows.append(f"| {names} | {torch} | {rule.note} |")
    return "\n".join(rows)


def with_guide_table(guide: str) -> str:
    """The guide's text with the generated table between the markers.

    >>> text = with_guide_table(GUIDE_START + "old" + GUIDE_END)
    >>> "old" in text, "`torch.sum(input_tensor)`" in text
    (False, True)
    """
    start, end = guide.find(GUIDE_START), guide.find(GUIDE_END)
    if start < 0 or end < start:
        raise ValueError(
            f"the guide has no '{GUIDE_START}' ... '{GUIDE_END}' markers: add them where the "
            "table goes"
        )
    return guide[: start + len(GUIDE_START)] + "\n" + guide_table() + "\n" + guide[end:]
