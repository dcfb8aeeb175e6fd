"""The translation table's rules for `tf.nn` activations, softmaxes and norms."""

from __future__ import annotations

from ._rule import Rule, _activation, _v


def _softmax(name: str) -> Rule:
    """`tf.nn.softmax` and `tf.nn.log_softmax` (and their `tf.math` names)."""
    return Rule(
        (f"nn.{name}", f"math.{name}"),
        ("logits", "axis", "name"),
        (
            _v(f"torch.{name}({{logits}}, dim={{axis}})", "axis:axis"),
            _v(f"torch.{name}({{logits}}, dim=-1)"),
            _v(f"tf_ops.{name}({{logits}}, {{axis}})"),
        ),
        note="No axis: the last, in both; an axis known at run time only (None is the last) "
        f"goes to `tf_ops.{name}`.",
    )


NN_RULES: tuple[Rule, ...] = (
    # --- activations ---------------------------------------------------------------------------
    _softmax("softmax"),
    _softmax("log_softmax"),
    _activation(("nn.elu",), "torch.nn.functional.elu", "The gradient at 0 is 1, in both."),
    Rule(
        ("nn.selu",),
        ("features", "name"),
        (_v("tf_ops.selu({features})"),),
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
            _v("tf_ops.gelu({features}, approximate=True)", "approximate=True"),
            _v("tf_ops.gelu({features})"),
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
            _v("tf_ops.l2_normalize({x}, {axis}, {epsilon})"),
            _v("tf_ops.l2_normalize({x}, {axis})"),
            _v("tf_ops.l2_normalize({x}, epsilon={epsilon})"),
            _v("tf_ops.l2_normalize({x})"),
        ),
        note="TF's formula, `x * rsqrt(max(sum(x**2), epsilon))`, epsilon 1e-12 by default: "
        "epsilon bounds the squared norm, not the norm; a tie's gradient goes to the sum, as "
        "TF's `maximum` gives it (`torch.clamp`'s changed in torch 2.14).",
    ),
    Rule(
        ("nn.crelu",),
        ("features", "name", "axis"),
        (
            _v("torch.cat([torch.relu({features}), torch.relu(-{features})], dim={axis})"),
            _v("torch.cat([torch.relu({features}), torch.relu(-{features})], dim=-1)"),
        ),
        note="The gradient at 0 is 0, in both.",
    ),
    Rule(
        ("nn.batch_normalization",),
        ("x", "mean", "variance", "offset", "scale", "variance_epsilon", "name"),
        (
            _v(
                "tf_ops.batch_normalization({x}, {mean}, {variance}, {offset}, {scale}, "
                "{variance_epsilon})"
            ),
        ),
        note="TF's order of operations: `x * inv + (offset - mean * inv)`.",
        otherwise="give all six arguments",
    ),
    Rule(
        ("nn.softmax_cross_entropy_with_logits",),
        ("labels", "logits", "axis", "name"),
        (
            _v("tf_ops.softmax_cross_entropy_with_logits({labels}, {logits}, {axis})"),
            _v("tf_ops.softmax_cross_entropy_with_logits({labels}, {logits})"),
        ),
        note="TF2's: gradients to the labels too; the logits' gradient is TF's `softmax - "
        "labels` (the true derivative when each row of labels sums to 1).",
    ),
    Rule(
        ("nn.sparse_softmax_cross_entropy_with_logits",),
        ("labels", "logits", "name"),
        (_v("tf_ops.sparse_softmax_cross_entropy_with_logits({labels}, {logits})"),),
        note="Over the last axis, logits of any rank.",
    ),
    *(
        Rule(
            names,
            ("input", "filters", "strides", "padding", "data_format", "dilations", "name"),
            (
                _v("tf_ops.conv2d({input}, {filters}, {strides}, {padding})"),
                _v("tf_ops.conv2d({input}, {filters}, {strides}, {padding}, {data_format})"),
                _v(
                    "tf_ops.conv2d({input}, {filters}, {strides}, {padding}, dilations={dilations})"
                ),
                _v(
                    "tf_ops.conv2d({input}, {filters}, {strides}, {padding}, {data_format}, "
                    "{dilations})"
                ),
            ),
            note="NHWC input and `(height, width, in, out)` filters, as in TF, and TF's SAME "
            "padding (the extra row or column at the end).",
            otherwise="explicit padding lists are not translated",
        )
        for names in [("nn.conv2d",)]
    ),
    *(
        Rule(
            (f"nn.{kind}_pool2d", f"nn.{kind}_pool"),
            ("input", "ksize", "strides", "padding", "data_format", "name"),
            (
                _v(f"tf_ops.{kind}_pool2d({{input}}, {{ksize}}, {{strides}}, {{padding}})"),
                _v(
                    f"tf_ops.{kind}_pool2d({{input}}, {{ksize}}, {{strides}}, {{padding}}, "
                    "{data_format})"
                ),
            ),
            note=f"4-D input, NHWC as in TF; {why}",
        )
        for kind, why in (
            ("max", "the padding of SAME never wins."),
            ("avg", "with SAME each window averages only the elements inside the input, as TF."),
        )
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
)
