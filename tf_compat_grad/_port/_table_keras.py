"""The translation table's rules for Keras and `tf.Module`: the base classes (a subclass
becomes an `nn.Module` through `tf_compat_grad.layers`, see `_classes`), the built-in layers
whose formulas `tf_compat_grad.layers` keeps, initialisers and activations."""

from __future__ import annotations

from ._rule import Rule, _v

_KERAS = ("keras.", "keras.layers.")


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
    # --- initialisers and activations -------------------------------------------------------
    *(
        Rule(
            (f"keras.initializers.{name}", *((v1,) if v1 else ())),
            value=f"layers.{name}",
            note="The same distribution, torch's random numbers.",
        )
        for name, v1 in _INITIALIZERS
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
        (_v("str(torch.get_default_dtype()).removeprefix('torch.')"),),
        note="Keras's global float type is torch's default dtype here.",
    ),
    Rule(
        ("keras.activations.get",),
        value="layers.get_activation",
        note="By name with TF's formulas, a function, or None (the identity).",
    ),
    Rule(("keras.initializers.get",), value="layers.get_initializer"),
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
