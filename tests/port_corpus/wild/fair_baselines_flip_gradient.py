"""A gradient reversal layer for fairness baselines (adversarial debiasing): identity forward,
negated gradient, wrapped in a Keras layer with no weights.

Source: mycal-tucker/fair-baselines, models/flip_gradient_tf.py. No license file in the indexed copy.
"""

import tensorflow as tf


@tf.custom_gradient
def grad_reverse(x):
    y = tf.identity(x)

    def custom_grad(dy):
        return -dy

    return y, custom_grad


class GradReverse(tf.keras.layers.Layer):
    def __init__(self):
        super().__init__()

    def call(self, x):
        return grad_reverse(x)


EXAMPLES = {
    "grad_reverse": ([1.0, -2.0, 0.5],),
    "GradReverse": {"call": ([[0.5, -1.0], [2.0, 0.25]],)},
}
