"""The translation table's rules for math: reductions (`tf.reduce_*`, `tf.nn.moments`, `cumsum`)
and elementwise functions and operators."""

from __future__ import annotations

from ._rule import Rule, Variant, _activation, _flagged, _reduction, _unary, _v


def _scans(name: str) -> tuple[Variant, ...]:
    """`tf_ops.cumsum`/`cumprod` with each combination of the literal flags, with and without
    an axis."""
    found = []
    for axis in (", {axis}", ""):
        for flags in (("exclusive", "reverse"), ("exclusive",), ("reverse",), ()):
            keywords = "".join(f", {flag}=True" for flag in flags)
            found.append(
                _v(f"tf_ops.{name}({{x}}{axis}{keywords})", *(f"{flag}=True" for flag in flags))
            )
    return tuple(found)


MATH_RULES: tuple[Rule, ...] = (
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
            _v("tf_ops.reduce_prod({input_tensor}, {axis}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_prod({input_tensor}, {axis})"),
        ),
        flags={"keepdims": False},
        note="Zeros in the input get the exact gradient in both. The second derivative at "
        "a zero: TF gives 0, torch the true value.",
        otherwise="`keepdims=True` needs an axis",
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
        (_v("tf_ops.maximum({x}, {y})"),),
        note="On ties TF gives the whole gradient to x; `torch.maximum` would split it, and "
        "`torch.clamp`'s gradient at its bound differs between torch releases. A NaN in x or y "
        "gives NaN, as in TF; the gradient at a NaN x goes to x here, to y in TF.",
    ),
    Rule(
        ("minimum", "math.minimum"),
        ("x", "y", "name"),
        (_v("tf_ops.minimum({x}, {y})"),),
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
        (_v("tf_ops.clip_by_value({t}, {clip_value_min}, {clip_value_max})"),),
        note="The gradient passes at the bounds, as in TF (`torch.clamp` passes it there up to "
        "torch 2.13 and not from 2.14).",
    ),
    Rule(
        ("clip_by_norm",),
        ("t", "clip_norm", "axes", "name"),
        (
            _v("tf_ops.clip_by_norm({t}, {clip_norm}, {axes})"),
            _v("tf_ops.clip_by_norm({t}, {clip_norm})"),
        ),
        note="TF's formula, `t * clip_norm / max(norm, clip_norm)`, with the L2 norm over all "
        "elements (or `axes`) and a tie's gradient to the norm, as TF's `maximum` gives it; an "
        "all-zero t stays zero.",
    ),
    Rule(
        ("math.bincount",),
        ("arr", "weights", "minlength", "maxlength", "dtype", "name", "axis", "binary_output"),
        tuple(
            _v(
                "tf_ops.bincount({arr}"
                + "".join(
                    f", {p}={{{p}}}" for p in ("minlength", "maxlength", "dtype") if p in given
                )
                + ")"
            )
            for given in (
                {"minlength", "maxlength", "dtype"},
                {"minlength", "maxlength"},
                {"minlength", "dtype"},
                {"maxlength", "dtype"},
                {"minlength"},
                {"maxlength"},
                {"dtype"},
                set(),
            )
        ),
        flags={"binary_output": False},
        note="Counts without `weights`, `axis` or `binary_output` (those are not translated); "
        "int32 unless `dtype=`, as in TF.",
        otherwise="`weights=`, `axis=` and `binary_output=True` are not translated",
    ),
    Rule(
        ("math.divide_no_nan", "div_no_nan"),
        ("x", "y", "name"),
        (_v("tf_ops.divide_no_nan({x}, {y})"),),
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
            _v(
                "tf_ops.reduce_logsumexp({input_tensor}, {axis}, keepdims={keepdims})",
            ),
            _v("tf_ops.reduce_logsumexp({input_tensor}, {axis}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_logsumexp({input_tensor}, {axis})"),
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
            _v("tf_ops.reduce_variance({input_tensor}, {axis}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_variance({input_tensor}, {axis})"),
            _v("tf_ops.reduce_variance({input_tensor}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_variance({input_tensor})"),
        ),
        flags={"keepdims": False},
        note="TF's formula, the mean of squared deviations (population variance), so that "
        "second derivatives match too.",
    ),
    Rule(
        ("math.reduce_std",),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v("tf_ops.reduce_std({input_tensor}, {axis}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_std({input_tensor}, {axis})"),
            _v("tf_ops.reduce_std({input_tensor}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.reduce_std({input_tensor})"),
        ),
        flags={"keepdims": False},
        note="The square root of `tf.math.reduce_variance`'s formula (`tf.sqrt`'s note applies "
        "at a zero variance).",
    ),
    Rule(
        ("nn.moments",),
        ("x", "axes", "shift", "keepdims", "name"),
        (
            _v("tf_ops.moments({x}, {axes}, keepdims=True)", "keepdims=True"),
            _v("tf_ops.moments({x}, {axes})"),
        ),
        flags={"keepdims": False},
        note="(mean, variance) with TF's formula: the variance's mean is a stopped gradient, "
        "which shows in second derivatives. float16 inputs: TF computes in float32, this does "
        "not.",
        otherwise="`shift` is not translated",
    ),
    Rule(
        ("math.cumsum", "cumsum"),
        ("x", "axis", "exclusive", "reverse", "name"),
        (
            _v("torch.cumsum({x}, dim={axis})", "axis:axis"),
            _v("torch.cumsum({x}, dim=0)"),
            *_scans("cumsum"),
        ),
        flags={"exclusive": False, "reverse": False},
        note="No axis: axis 0, as TF. `exclusive` (from 0), `reverse` or an axis known at "
        "run time only: `tf_ops.cumsum`.",
    ),
    # --- elementwise, more -------------------------------------------------------------------
    _unary(("negative", "math.negative"), "x", "torch.neg"),
    _unary(("math.sin", "sin"), "x", "torch.sin"),
    _unary(("math.cos", "cos"), "x", "torch.cos"),
    _unary(("math.tan", "tan"), "x", "torch.tan"),
    _unary(("math.atan", "atan"), "x", "torch.atan"),
    _unary(("math.asin", "asin"), "x", "torch.asin"),
    _unary(("math.acos", "acos"), "x", "torch.acos"),
    _unary(("math.sinh", "sinh"), "x", "torch.sinh"),
    _unary(("math.cosh", "cosh"), "x", "torch.cosh"),
    _unary(("math.asinh", "asinh"), "x", "torch.asinh"),
    _unary(("math.acosh", "acosh"), "x", "torch.acosh"),
    _unary(("math.atanh", "atanh"), "x", "torch.atanh"),
    _unary(("math.erfc",), "x", "torch.erfc"),
    _unary(("math.erfinv",), "x", "torch.erfinv"),
    _unary(("math.ndtri",), "x", "torch.special.ndtri"),
    _unary(("math.bessel_i0", "math.special.bessel_i0"), "x", "torch.special.i0"),
    _unary(("math.bessel_i0e", "math.special.bessel_i0e"), "x", "torch.special.i0e"),
    _unary(("math.bessel_i1", "math.special.bessel_i1"), "x", "torch.special.i1"),
    _unary(("math.bessel_i1e", "math.special.bessel_i1e"), "x", "torch.special.i1e"),
    _unary(("math.rint",), "x", "torch.round", "Half to even, in both; no gradient (TF: None)."),
    _unary(
        ("math.conj", "conj"), "x", "torch.conj", "A real tensor is returned as it is, in both."
    ),
    _unary(("math.real", "real"), "input", "torch.real", "A real tensor as it is, in both."),
    _unary(
        ("math.imag", "imag"),
        "input",
        "torch.imag",
        "Complex input only (torch raises on real input, where TF gives zeros).",
    ),
    Rule(
        ("math.erfcinv",),
        ("x", "name"),
        (_v("-torch.special.ndtri(0.5 * {x}) * 0.7071067811865476"),),
        note="TF's formula, `-ndtri(x / 2) * sqrt(1 / 2)`.",
    ),
    *(
        Rule(
            (f"math.{name}", name),
            ("a", "x", "name"),
            (_v(f"torch.special.{target}({{a}}, {{x}})"),),
            note="The gradient with respect to x, as TF's; torch has none with respect to a "
            "(it raises where TF computes one).",
        )
        for name, target in (("igamma", "gammainc"), ("igammac", "gammaincc"))
    ),
    Rule(
        ("math.polygamma",),
        ("a", "x", "name"),
        (_v("torch.polygamma({a}, {x})", "a:axis"),),
        note="The order a a literal int (torch takes a Python int).",
        otherwise="the order `a` must be a literal int",
    ),
    Rule(
        ("math.zeta",),
        ("x", "q", "name"),
        (_v("torch.special.zeta({x}, {q})"),),
        note="torch defines no gradient (it raises where TF gives q's).",
    ),
    _flagged(
        (
            "math.angle",
            "math.betainc",
            "math.multiply_no_nan",
            "math.reciprocal_no_nan",
            "math.xdivy",
        ),
        "TF's value or gradient at its special points (a zero divisor, a real input) has no "
        "one-line torch form: translate it by hand for the inputs you have",
    ),
    Rule(
        ("math.nextafter",),
        ("x1", "x2", "name"),
        (_v("torch.nextafter({x1}, {x2})"),),
        note="No gradient, in both.",
    ),
    Rule(
        ("math.reduce_euclidean_norm",),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(
                "torch.sqrt(torch.sum(torch.square({input_tensor}), dim={axis}, keepdim=True))",
                "keepdims=True",
                "axis:axes",
            ),
            _v("torch.sqrt(torch.sum(torch.square({input_tensor}), dim={axis}))", "axis:axes"),
            _v("torch.sqrt(torch.sum(torch.square({input_tensor})))"),
        ),
        flags={"keepdims": False},
        note="TF's formula, the square root of the sum of squares (NaN gradient at zero, in both).",
        otherwise="`axis` must be a literal int or a non-empty list of literal ints",
    ),
    Rule(
        ("math.cumprod", "cumprod"),
        ("x", "axis", "exclusive", "reverse", "name"),
        (
            _v("torch.cumprod({x}, dim={axis})", "axis:axis"),
            _v("torch.cumprod({x}, dim=0)"),
            *_scans("cumprod"),
        ),
        flags={"exclusive": False, "reverse": False},
        note="No axis: axis 0, as TF; zeros get the exact gradient in both. `exclusive` (from 1), "
        "`reverse` or an axis known at "
        "run time only: `tf_ops.cumprod`.",
    ),
    Rule(
        ("math.xlogy",),
        ("x", "y", "name"),
        (_v("torch.xlogy({x}, {y})"),),
        note="0 where x == 0 (also for y == 0), in both.",
    ),
    Rule(
        ("math.xlog1py",),
        ("x", "y", "name"),
        (_v("torch.special.xlog1py({x}, {y})"),),
        note="0 where x == 0, in both.",
    ),
    Rule(
        ("math.divide", "math.truediv", "divide", "truediv", "realdiv"),
        ("x", "y", "name"),
        (_v("tf_ops.divide({x}, {y})"),),
        note="Integer tensors become floats as in TF: 8- and 16-bit ones float32, 32- and "
        "64-bit ones float64 (torch: its default dtype).",
    ),
    Rule(
        ("math.floordiv", "floordiv"),
        ("x", "y", "name"),
        (_v("torch.floor_divide({x}, {y})"),),
        note="Rounds toward minus infinity, in both (also for integers); no gradient.",
    ),
    Rule(
        ("math.floormod", "floormod", "math.mod", "mod"),
        ("x", "y", "name"),
        (_v("torch.remainder({x}, {y})"),),
        note="`x - floor(x / y) * y`: the sign of y, in both; the gradient with respect to y "
        "is `-floor(x / y)`, in both.",
    ),
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
)
