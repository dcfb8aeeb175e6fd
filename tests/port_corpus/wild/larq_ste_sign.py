"""Larq's sign quantizers: straight-through sign with a clipped identity gradient, ApproxSign's
weighted gradient, and the magnitude-aware sign of Bi-Real Net (a computed reduction axis).

Source: larq/larq, larq/quantizers.py (Apache-2.0); `math.sign` is larq/math.py's, inlined.
"""

import tensorflow as tf


def sign(x):
    """A sign function that will never be zero"""
    return tf.sign(tf.sign(x) + 0.1)


@tf.custom_gradient
def _binarize_with_identity_grad(x):
    return sign(x), lambda dy: dy


@tf.custom_gradient
def _binarize_with_weighted_grad(x):
    def grad(dy):
        return (1 - tf.abs(x)) * 2 * dy

    return sign(x), grad


def ste_sign(x, clip_value=1.0):
    x = tf.clip_by_value(x, -clip_value, clip_value)

    return _binarize_with_identity_grad(x)


def magnitude_aware_sign(x, clip_value=1.0):
    scale_factor = tf.reduce_mean(tf.abs(x), axis=list(range(len(x.shape) - 1)))

    return tf.stop_gradient(scale_factor) * ste_sign(x, clip_value=clip_value)


def approx_sign(x):
    x = tf.clip_by_value(x, -1, 1)

    return _binarize_with_weighted_grad(x)


EXAMPLES = {
    "ste_sign": ([-1.5, -0.5, 0.0, 0.25, 2.0], {"py": 1.0}),
    "magnitude_aware_sign": ([[0.5, -1.5, 0.25], [-0.2, 0.0, 2.0]],),
    "approx_sign": ([-1.5, -0.5, 0.0, 0.25, 2.0],),
}
