"""A square root whose gradient is capped near 0 instead of going to infinity."""

import tensorflow as tf


@tf.custom_gradient
def safe_sqrt(x):
    y = tf.sqrt(x)

    def grad(dy):
        safe = tf.maximum(y, 1e-3)
        return tf.where(x > 0, dy * 0.5 / safe, tf.zeros_like(dy))

    return y, grad


EXAMPLES = {"safe_sqrt": ([0.0, 1e-8, 0.25, 4.0, 9.0],)}
