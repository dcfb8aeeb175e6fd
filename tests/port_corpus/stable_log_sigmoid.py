"""Numerically stable log-sigmoid, softplus and log-sum-exp with hand-written gradients."""

import tensorflow as tf


@tf.custom_gradient
def log_sigmoid(x):
    """log(sigmoid(x)) = -softplus(-x), with the gradient sigmoid(-x)."""
    y = -tf.math.softplus(-x)

    def grad(dy):
        return dy * tf.math.sigmoid(-x)

    return y, grad


@tf.custom_gradient
def stable_softplus(x):
    y = tf.maximum(x, 0.0) + tf.math.log1p(tf.exp(-tf.abs(x)))

    def grad(dy):
        return dy * tf.nn.sigmoid(x)

    return y, grad


@tf.custom_gradient
def reduce_logsumexp(x):
    y = tf.math.reduce_logsumexp(x, axis=1, keepdims=True)

    def grad(dy):
        return dy * tf.nn.softmax(x, axis=1)

    return tf.squeeze(y, axis=1), lambda dy: grad(tf.expand_dims(dy, 1))


EXAMPLES = {
    "log_sigmoid": ([-40.0, -2.0, 0.0, 1.5, 30.0],),
    "stable_softplus": ([-40.0, -2.0, 0.0, 1.5, 30.0],),
    "reduce_logsumexp": ([[1.0, 2.0, 3.0], [-500.0, 0.0, 500.0]],),
}
