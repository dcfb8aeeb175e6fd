"""A softplus whose gradient is written as `grad / (1 + 1 / exp(z))`, the book's example of a
custom gradient for numerical stability (the forward pass still overflows for large z).

Source: ageron/handson-ml2, 12_custom_models_and_training_with_tensorflow.ipynb (Apache-2.0).
"""

import tensorflow as tf


@tf.custom_gradient
def my_better_softplus(z):
    exp = tf.exp(z)

    def my_softplus_gradients(grad):
        return grad / (1 + 1 / exp)

    return tf.math.log(exp + 1), my_softplus_gradients


EXAMPLES = {"my_better_softplus": ([-5.0, 0.0, 1.5, 30.0],)}
