"""ADAPT's gradient handler for domain adaptation: a Keras layer holding a non-trainable
float32 `tf.Variable` multiplier, whose call is an identity with the upstream gradient scaled by
it (and a zero gradient for the multiplier).

Source: adapt-python/adapt, adapt/utils.py (BSD-2-Clause); the get_config body past
`config.update({` is not in the indexed copy and is completed with the constructor argument.
"""

import tensorflow as tf
from tensorflow.keras.layers import Layer


@tf.custom_gradient
def _grad_handler(x, lambda_):
    y = tf.identity(x)

    def custom_grad(dy):
        return (lambda_ * dy, 0.0 * lambda_)

    return y, custom_grad


class GradientHandler(Layer):
    """
    Multiply gradients with a scalar during backpropagation.

    Act as identity in forward step.

    Parameters
    ----------
    lambda_init : float (default=1.)
        Scalar multiplier
    """

    def __init__(self, lambda_init=1.0, name="g_handler"):
        super().__init__(name=name)
        self.lambda_init = lambda_init
        self.lambda_ = tf.Variable(lambda_init, trainable=False, dtype="float32")

    def call(self, x):
        """
        Call gradient handler.
        """
        return _grad_handler(x, self.lambda_)

    def get_config(self):
        config = super().get_config().copy()
        config.update({"lambda_init": self.lambda_init})
        return config


EXAMPLES = {
    "GradientHandler": {
        "init": [0.5],
        "floatx": "float32",
        "call": ({"tensor": [[1.0, -2.0], [0.5, 3.0]], "dtype": "float32"},),
    }
}
