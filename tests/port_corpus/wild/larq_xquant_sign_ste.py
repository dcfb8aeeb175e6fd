"""Larq's first quantizers, from when the package was called xquant: a sign with an identity
(straight-through) gradient, and a clipped variant that clips before the sign (so the gradient
is cut outside [-1, 1] by `clip_by_value`'s own gradient).

Source: larq/larq, xquant/quantizers.py (Apache-2.0), an early version; the
`utils.register_keras_custom_object` decorators and the (de)serialization helpers left out.
"""

import tensorflow as tf


@tf.custom_gradient
def sign_ste(x):
    def grad(dy):
        return dy

    return tf.sign(x), grad


def sign_clip_ste(x):
    return sign_ste(tf.clip_by_value(x, -1, 1))


EXAMPLES = {
    "sign_ste": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
    "sign_clip_ste": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
}
