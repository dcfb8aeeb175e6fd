"""A dense layer on module-level variables whose gradient function returns the variables'
gradients through `variables=None` (the signature TF's documentation uses)."""

import tensorflow as tf

kernel = tf.Variable([[0.5, -1.0], [2.0, 0.25], [-0.5, 1.5]], dtype=tf.float64)
bias = tf.Variable([0.1, -0.2], dtype=tf.float64)


@tf.custom_gradient
def dense(x):
    y = tf.matmul(x, kernel) + bias

    def grad(dy, variables=None):
        dx = tf.matmul(dy, kernel, transpose_b=True)
        dkernel = tf.matmul(x, dy, transpose_a=True)
        dbias = tf.reduce_sum(dy, axis=0)
        return dx, [dkernel, dbias]

    return y, grad


EXAMPLES = {"dense": ([[1.0, 2.0, -1.0], [0.5, 0.0, 3.0]],)}
