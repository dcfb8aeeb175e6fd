"""A gradient reversal layer whose strength `lamda` is a keyword argument of the layer's call,
passed on to a two-argument custom gradient that returns None for it.

Source: takumi0shibata/Adversarial-AES, custom_layers/gradient_reversal.py. No license file in the indexed copy.
"""

import tensorflow as tf


# Gradient Reversal Layer
@tf.custom_gradient
def gradient_reverse(x, lamda=1.0):
    y = tf.identity(x)

    def grad(dy):
        return lamda * -dy, None

    return y, grad


class GradientReversalLayer(tf.keras.layers.Layer):
    def __init__(self):
        super().__init__()

    def call(self, x, lamda=1.0):
        return gradient_reverse(x, lamda)


EXAMPLES = {
    "GradientReversalLayer": {
        "call": ([[0.5, -1.0, 2.0], [1.5, 0.0, -0.25]],),
        "call_kwargs": {"lamda": 0.3},
    }
}
