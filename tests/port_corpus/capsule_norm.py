"""Capsule networks: a norm that is safe at zero (epsilon inside the square root), the
squash non-linearity, and a norm with a hand gradient that is 0 at the zero vector."""

import tensorflow as tf

EPSILON = 1e-7


def safe_norm(s, axis=-1, epsilon=1e-7, keep_dims=False):
    squared_norm = tf.reduce_sum(tf.square(s), axis=axis, keepdims=keep_dims)
    return tf.sqrt(squared_norm + epsilon)


def squash(s):
    squared_norm = tf.reduce_sum(tf.square(s), axis=-1, keepdims=True)
    safe = tf.sqrt(squared_norm + EPSILON)
    squash_factor = squared_norm / (1.0 + squared_norm)
    unit_vector = s / safe
    return squash_factor * unit_vector


@tf.custom_gradient
def norm_with_safe_grad(x):
    y = tf.norm(x, axis=-1, keepdims=True)

    def grad(dy):
        return dy * (x / tf.maximum(y, EPSILON))

    return y, grad


def capsule_lengths(s):
    return safe_norm(s), squash(s)


EXAMPLES = {
    "capsule_lengths": ([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.5]],),
    "norm_with_safe_grad": ([[3.0, 4.0], [0.0, 0.0], [-1.0, 0.5]],),
}
