"""A gradient reversal layer: a Keras layer whose call applies an identity with a negated
gradient (domain-adversarial training).

Source: m2dsupsdlclass/lectures-labs,
labs/10_unsupervised_generative_models/solutions/grl.py (the import line added). No license file in the indexed copy.
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
        super().__init__(name="grl")

    def call(self, x):
        return grad_reverse(x)


EXAMPLES = {"GradReverse": {"call": ([[0.5, -1.0, 2.0], [1.5, 0.0, -0.25]],)}}
