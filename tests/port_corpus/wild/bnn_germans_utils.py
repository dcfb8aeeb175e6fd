"""Binarization and rounding whose gradient is the upstream clipped to [-1, 1] (integer clip
bounds on a float gradient).

Source: carlomarxdk/BNN, binary_neuron/Germans/utils.py. No license file in the indexed copy.
"""

import tensorflow as tf


@tf.custom_gradient
def binarize(x):
    def grad(dy):
        return tf.clip_by_value(dy, -1, 1)

    return tf.sign(x), grad


@tf.custom_gradient
def round(x):
    def grad(dy):
        return tf.clip_by_value(dy, -1, 1)

    return tf.round(x), grad


EXAMPLES = {
    "binarize": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
    "round": ([-1.5, -0.4, 0.5, 0.7, 2.5],),
}
