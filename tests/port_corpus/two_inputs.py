"""Two inputs: a bilinear form through matmul with transposes, and its gradient for both."""

import tensorflow as tf


@tf.custom_gradient
def bilinear(a, b):
    y = tf.matmul(a, b, transpose_b=True)

    def grad(dy):
        da = tf.matmul(dy, b)
        db = tf.matmul(dy, a, transpose_a=True)
        return da, db

    return y, grad


EXAMPLES = {
    "bilinear": (
        [[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]],
        [[0.25, -0.5, 1.0], [2.0, 0.0, -1.0], [1.5, 1.0, 0.5], [-0.25, 3.0, 2.0]],
    )
}
