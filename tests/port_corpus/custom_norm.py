"""An L2 norm over the last axis whose gradient is 0 (not NaN) at the zero vector."""

import tensorflow as tf


@tf.custom_gradient
def safe_norm(x):
    n = tf.sqrt(tf.reduce_sum(tf.square(x), axis=-1, keepdims=True))

    def grad(dy):
        return tf.math.divide_no_nan(tf.expand_dims(dy, -1) * x, n)

    return tf.squeeze(n, axis=-1), grad


EXAMPLES = {"safe_norm": ([[3.0, 4.0], [0.0, 0.0], [-1.0, 2.0]],)}
