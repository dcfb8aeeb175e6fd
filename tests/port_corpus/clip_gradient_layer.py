"""Gradient clipping at a layer boundary: identity forward, clipped gradient backward."""

import tensorflow as tf


@tf.custom_gradient
def clip_gradient(x, clip_value_min, clip_value_max):
    def grad(dy):
        return tf.clip_by_value(dy, clip_value_min, clip_value_max), None, None

    return x, grad


@tf.custom_gradient
def grad_norm_clip(x):
    """Clip the gradient of each example (row) to a maximum L2 norm of 1."""

    def grad(dy):
        norm = tf.sqrt(tf.reduce_sum(tf.square(dy), axis=1, keepdims=True))
        scale = tf.minimum(1.0, 1.0 / (norm + 1e-6))
        return dy * scale

    return tf.identity(x), grad


EXAMPLES = {
    "clip_gradient": ([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]], {"py": -1.2}, {"py": 1.2}),
    "grad_norm_clip": ([[1.0, -2.0, 0.5], [0.1, 0.0, -0.2]],),
}
