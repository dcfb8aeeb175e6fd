"""Binary-network helpers: hard tanh, sign and round, each with an identity gradient (`round`
shadows the builtin).

Source: carlomarxdk/BNN, binary_neuron/utils.py. No license file in the indexed copy.
"""

import tensorflow as tf


@tf.custom_gradient
def hard_tanh(x):
    def grad(dy):
        return dy

    return tf.clip_by_value(x, -1.0, 1.0), grad


@tf.custom_gradient
def binarize(x):
    def grad(dy):
        return dy

    return tf.sign(x), grad


@tf.custom_gradient
def round(x):
    def grad(dy):
        return dy

    return tf.round(x), grad


EXAMPLES = {
    "hard_tanh": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
    "binarize": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
    "round": ([-1.5, -0.4, 0.5, 0.7, 2.5],),
}
