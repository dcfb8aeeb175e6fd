"""A `tf.Module` whose `__call__` has a custom gradient that scales the variable's gradient
(returned through `variables=`)."""

import tensorflow as tf


class ScaledLinear(tf.Module):
    def __init__(self, name=None):
        super().__init__(name=name)
        self.w = tf.Variable([0.5, -1.0, 2.0], dtype=tf.float64)

    @tf.custom_gradient
    def __call__(self, x):
        def grad(dy, variables=None):
            return dy * self.w, [0.5 * tf.reduce_sum(dy * x, axis=0)]

        return x * self.w, grad


linear = ScaledLinear()


def scaled_linear(x):
    return linear(x)


EXAMPLES = {"scaled_linear": ([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]],)}
