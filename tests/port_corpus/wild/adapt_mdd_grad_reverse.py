"""ADAPT's gradient reversal for Maximum Disparity Discrepancy: a module-level custom gradient
and a Keras layer, imported the long way (`from tensorflow.keras.layers import ...`), around it.

Source: adapt-python/adapt, adapt/feature_based/_mdd.py (BSD-2-Clause); the MDD model class left
out.
"""

import numpy as np
import tensorflow as tf
from tensorflow.keras import Sequential, Model
from tensorflow.keras.layers import Dense, Input
from tensorflow.keras.constraints import MinMaxNorm
from tensorflow.keras.optimizers import Adam
from tensorflow.keras.layers import multiply, subtract
from tensorflow.keras import losses
import tensorflow.keras.backend as K


@tf.custom_gradient
def _grad_reverse(x):
    y = tf.identity(x)

    def custom_grad(dy):
        return -dy

    return y, custom_grad


class _GradReverse(tf.keras.layers.Layer):
    """
    Gradient Reversal Layer: inverse sign of gradient during
    backpropagation.
    """

    def __init__(self):
        super().__init__()

    def call(self, x):
        return _grad_reverse(x)


EXAMPLES = {
    "_grad_reverse": ([1.0, -2.0, 0.5],),
    "_GradReverse": {"call": ([[0.5, -1.0], [2.0, 0.25]],)},
}
