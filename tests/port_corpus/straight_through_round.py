"""Straight-through estimators: round forward, identity gradient (quantization-aware training)."""

import tensorflow as tf


@tf.custom_gradient
def ste_round(x):
    def grad(dy):
        return dy

    return tf.round(x), grad  # half to even: 2.5 -> 2


def pass_through_round(x):
    return tf.grad_pass_through(tf.round)(x)


@tf.custom_gradient
def ste_sign(x):
    def grad(dy):
        # gradient of the hard tanh: pass only inside [-1, 1]
        return dy * tf.cast(tf.abs(x) <= 1.0, dy.dtype)

    return tf.sign(x), grad


EXAMPLES = {
    "ste_round": ([0.4, 1.5, 2.5, -0.5, -1.7, 3.0],),
    "pass_through_round": ([0.4, 1.5, 2.5, -0.5, -1.7, 3.0],),
    "ste_sign": ([0.4, -1.5, 0.0, 1.0, -0.2, 2.5],),
}
