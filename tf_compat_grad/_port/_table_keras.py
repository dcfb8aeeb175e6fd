"""The translation table's rules for Keras and `tf.Module`: the base classes (a subclass
becomes an `nn.Module` through `tf_compat_grad.layers`, see `_classes`), the built-in layers
whose formulas `tf_compat_grad.layers` keeps, initialisers and activations."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ._rule import Rule, _v

_KERAS = ("keras.", "keras.layers.")
# `tf.keras.backend.floatx()`: the name of torch's default dtype (as a `dtype=` argument of a
# table call, the dtype itself: see `_arguments`).
FLOATX = "str(torch.get_default_dtype()).removeprefix('torch.')"


def _keras(name: str, target: str, note: str = "", defaults: tuple[str, ...] = ()) -> Rule:
    """A Keras class under `tf.keras.NAME` and `tf.keras.layers.NAME`, a value rule."""
    return Rule(
        tuple(prefix + name for prefix in _KERAS),
        value=target,
        note=note,
        defaults=defaults,
    )


_INITIALIZERS = (
    ("Zeros", "zeros_initializer"),
    ("Ones", "ones_initializer"),
    ("Constant", "constant_initializer"),
    ("RandomNormal", "random_normal_initializer"),
    ("RandomUniform", "random_uniform_initializer"),
    ("TruncatedNormal", "truncated_normal_initializer"),
    ("GlorotUniform", "glorot_uniform_initializer"),
    ("GlorotNormal", "glorot_normal_initializer"),
    ("HeNormal", ""),
    ("HeUniform", ""),
    ("LecunNormal", ""),
    ("LecunUniform", ""),
)

_ACTIVATIONS = {
    "sigmoid": "torch.sigmoid",
    "tanh": "torch.tanh",
    "softsign": "torch.nn.functional.softsign",
    "elu": "torch.nn.functional.elu",
    "exponential": "torch.exp",
    "relu6": "torch.nn.functional.relu6",
    "swish": "torch.nn.functional.silu",
    "silu": "torch.nn.functional.silu",
}

KERAS_RULES: tuple[Rule, ...] = (
    # --- base classes ------------------------------------------------------------------------
    Rule(
        ("keras.layers.Layer", "keras.Layer"),
        value="layers.Layer",
        note="A subclass becomes an `nn.Module`: `call` -> `forward` (`training=` kept), "
        "`build(input_shape)` runs on the first call as in Keras, `self.add_weight(...)` makes "
        "a Parameter (a buffer if `trainable=False`) with Keras's initialiser, floating inputs "
        "are cast to the layer's dtype. `@tf.custom_gradient` on `call` stays on `forward`, "
        "the layer's weights its `variables`.",
    ),
    Rule(
        ("Module",),
        value="layers.Module",
        note="A subclass becomes an `nn.Module`: `__call__` -> `forward`, `tf.Variable` "
        "attributes Parameters.",
    ),
    # --- built-in layers -----------------------------------------------------------------------
    _keras("Dense", "layers.Dense", "Keras's kernel `(in, units)` and initialisers."),
    _keras(
        "Conv2D",
        "layers.Conv2D",
        "Keras's kernel `(height, width, in, filters)`, TF's `same` padding; the layout is "
        'written out: `data_format="channels_last"` (NHWC), Keras\'s default.',
        defaults=('data_format="channels_last"',),
    ),
    _keras(
        "BatchNormalization",
        "layers.BatchNormalization",
        "Keras's formulas: the biased batch variance, `momentum=0.99`, `epsilon=1e-3`; "
        "`training=None` is inference, as in a Keras call outside `fit`.",
    ),
    _keras("Activation", "layers.Activation", "By name, with TF's formulas, or a function."),
    _keras("Dropout", "layers.Dropout", "torch's random numbers; identity unless training."),
    _keras("Flatten", "layers.Flatten"),
    _keras(
        "ReLU",
        "layers.ReLU",
        "Keras's formula: `max_value`, `negative_slope`, `threshold`, TF's gradients at the kinks.",
    ),
    _keras("LeakyReLU", "layers.LeakyReLU", "`negative_slope=0.3` (Keras 2: `alpha=`)."),
    _keras("Softmax", "layers.Softmax", "Over `axis` (the last by default)."),
    # --- initialisers, regularizers and activations ----------------------------------------
    *(
        Rule(
            (f"keras.initializers.{name}", f"initializers.{name}", *((v1,) if v1 else ())),
            value=f"layers.{name}",
            note="The same distribution, torch's random numbers.",
        )
        for name, v1 in _INITIALIZERS
    ),
    *(
        Rule(
            (f"keras.regularizers.{name}", f"keras.regularizers.{alias}"),
            value=f"layers.{name}",
            note="Keras 3's factors (rounded to float32) and defaults; the penalty of a trainable "
            "weight created with `add_weight(regularizer=...)` is in `layer.losses`, computed from "
            "its current value.",
        )
        for name, alias in (("L1", "l1"), ("L2", "l2"), ("L1L2", "l1_l2"))
    ),
    *(
        Rule(
            (f"keras.activations.{name}",),
            ("x",),
            (_v(f"{target}({{x}})"),),
            value=target,
        )
        for name, target in _ACTIVATIONS.items()
    ),
    Rule(
        ("keras.activations.relu",),
        value="layers.relu",
        note="Keras's formula: `negative_slope` (Keras 2: `alpha`), `max_value`, `threshold`.",
    ),
    Rule(("keras.backend.epsilon",), (), (_v("1e-07"),), note="Keras's default fuzz factor."),
    Rule(
        ("keras.backend.floatx",),
        (),
        (_v(FLOATX),),
        note="Keras's global float type is torch's default dtype here.",
    ),
    Rule(
        ("keras.activations.get",),
        value="layers.get_activation",
        note="By name with TF's formulas, a function, or None (the identity).",
    ),
    Rule(("keras.initializers.get",), value="layers.get_initializer"),
    Rule(
        ("keras.regularizers.get",),
        value="layers.get_regularizer",
        note="A regularizer's term is in the layer's `losses`, as Keras computes it.",
    ),
    Rule(
        ("keras.constraints.get",),
        value="layers.get_constraint",
        note="Kept in the layer's `constraints`: Keras applies each after an optimizer step, "
        "as the training loop must.",
    ),
    Rule(
        tuple(
            f"keras.{kind}.serialize"
            for kind in ("activations", "initializers", "regularizers", "constraints")
        ),
        value="layers.serialize",
        note="For `get_config`: a function's name, an object's class name and attributes.",
    ),
    _keras("InputSpec", "layers.InputSpec", "Kept as a description; not checked."),
    Rule(
        ("compat.dimension_value", "compat.v1.dimension_value"),
        ("dimension",),
        (_v("{dimension}"),),
        note="Shapes hold ints (or None) in torch already.",
    ),
    _keras("Lambda", "layers.Lambda", "`Lambda(function)` calls the function."),
    Rule(
        ("keras.Model", "keras.models.Model"),
        value="layers.Layer",
        note="A subclassed Model becomes a layer (an `nn.Module`): its `call` and weights "
        "translate; `compile`, `fit` and the other training methods do not exist in torch (a "
        "call of one raises AttributeError): write the training loop.",
    ),
    Rule(
        ("keras.utils.register_keras_serializable", "keras.saving.register_keras_serializable"),
        (),
        note="The decorator is removed: Keras's serialization registry has no torch "
        "counterpart (torch saves `state_dict`s).",
    ),
)

# `tf.keras.backend.NAME(params)` whose Keras body is a call of the TF function (by its table
# name) with the same arguments in the same order (keras/src/legacy/backend.py).
_BACKEND_CALLS = {
    "sum": ("reduce_sum", ("x", "axis", "keepdims")),
    "max": ("reduce_max", ("x", "axis", "keepdims")),
    "min": ("reduce_min", ("x", "axis", "keepdims")),
    "prod": ("reduce_prod", ("x", "axis", "keepdims")),
    "mean": ("reduce_mean", ("x", "axis", "keepdims")),
    "std": ("math.reduce_std", ("x", "axis", "keepdims")),
    "var": ("math.reduce_variance", ("x", "axis", "keepdims")),
    "cast": ("cast", ("x", "dtype")),
    "sign": ("sign", ("x",)),
    "square": ("square", ("x",)),
    "exp": ("exp", ("x",)),
    "log": ("math.log", ("x",)),
    "abs": ("abs", ("x",)),
    "round": ("round", ("x",)),
    "sin": ("sin", ("x",)),
    "cos": ("cos", ("x",)),
    "pow": ("pow", ("x", "a")),
    "maximum": ("maximum", ("x", "y")),
    "minimum": ("minimum", ("x", "y")),
    "greater": ("greater", ("x", "y")),
    "greater_equal": ("greater_equal", ("x", "y")),
    "less": ("less", ("x", "y")),
    "less_equal": ("less_equal", ("x", "y")),
    "equal": ("equal", ("x", "y")),
    "not_equal": ("not_equal", ("x", "y")),
    "sigmoid": ("sigmoid", ("x",)),
    "tanh": ("tanh", ("x",)),
    "softplus": ("math.softplus", ("x",)),
    "softsign": ("nn.softsign", ("x",)),
    "elu": ("nn.elu", ("x",)),
    "stop_gradient": ("stop_gradient", ("variables",)),
    "ones_like": ("ones_like", ("x", "dtype", "name")),
    "zeros_like": ("zeros_like", ("x", "dtype", "name")),
    "reshape": ("reshape", ("x", "shape")),
    "expand_dims": ("expand_dims", ("x", "axis")),
    "transpose": ("transpose", ("x",)),
    "tile": ("tile", ("x", "n")),
    "one_hot": ("one_hot", ("indices", "num_classes")),
    "l2_normalize": ("math.l2_normalize", ("x", "axis")),
}


def keras_backend_rules(table: Mapping[str, Rule]) -> list[Rule]:
    """Rules for `tf.keras.backend` functions that are a table function called with the same
    arguments (a parameter Keras names otherwise counts as the table's at its position), and
    those with a formula of their own (`sqrt` clamps at 0, `relu` has Keras's arguments, `clip`
    Keras's bound fixes: a `max_value` below `min_value` becomes `min_value`, None is unbounded)."""
    rules = [
        Rule(
            ("keras.backend.sqrt",),
            ("x",),
            (_v("torch.sqrt(tf_ops.maximum({x}, 0.0))"),),
            note="Keras clamps at 0 first: `sqrt(maximum(x, 0))`.",
        ),
        Rule(("keras.backend.relu",), value="layers.relu", note="Keras's formula."),
        Rule(
            ("keras.backend.clip",),
            ("x", "min_value", "max_value"),
            (_v("tf_ops.keras_clip({x}, {min_value}, {max_value})"),),
        ),
    ]
    for name, (target, params) in _BACKEND_CALLS.items():
        rule = table.get(target)
        if rule is None or rule.params is None:
            continue
        ours = tuple(rule.params[i] if i < len(rule.params) else p for i, p in enumerate(params))
        rules.append(dataclasses.replace(rule, names=(f"keras.backend.{name}",), params=ours))
    return rules
