"""Gradient reversal (domain-adversarial training): identity forward, negated gradient."""

import tensorflow as tf


@tf.custom_gradient
def reverse_gradient(x):
    y = tf.identity(x)

    def grad(dy):
        return -dy  # the reversal

    return y, grad


EXAMPLES = {"reverse_gradient": ([[0.5, -1.25, 2.0], [3.0, 0.0, -0.75]],)}
