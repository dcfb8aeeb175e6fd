"""Clip the gradient by its norm (a Python number argument, with a None gradient slot)."""

import tensorflow as tf


@tf.custom_gradient
def clip_gradient_by_norm(x, norm):
    y = tf.identity(x)

    def grad_fn(dresult):
        return [tf.clip_by_norm(dresult, norm), None]

    return y, grad_fn


@tf.custom_gradient
def clip_gradient_rows(x):
    def grad_fn(dresult):
        # each row of the gradient to norm at most 0.5
        return tf.clip_by_norm(dresult, 0.5, axes=[1])

    return tf.identity(x), grad_fn


EXAMPLES = {
    "clip_gradient_by_norm": ([[3.0, 4.0], [1.0, -2.0]], {"py": 1.0}),
    "clip_gradient_rows": ([[3.0, 4.0, 0.5], [0.1, -0.2, 0.05]],),
}
