"""Numerically stable log(1 + exp(x)), TensorFlow's own custom_gradient example, made stable."""

import tensorflow as tf


@tf.custom_gradient
def log1pexp(x):
    e = tf.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return tf.math.log(1 + e), grad


@tf.custom_gradient
def stable_log1pexp(x):
    # softplus for the value, the sigmoid for the gradient: no overflow for large x
    y = tf.nn.softplus(x)

    def grad(upstream):
        return upstream * tf.sigmoid(x)

    return y, grad


EXAMPLES = {
    "log1pexp": ([-3.0, -0.5, 0.0, 1.0, 20.0],),
    "stable_log1pexp": ([-40.0, -3.0, 0.0, 2.5, 25.0, 50.0],),
}
