"""Several inputs and several outputs: the gradient function takes one upstream per output
and returns one gradient per input."""

import tensorflow as tf


@tf.custom_gradient
def polar_stats(x, y):
    r2 = tf.math.squared_difference(x, -y) - 2 * x * y  # x**2 + y**2
    r = tf.math.sqrt(r2)
    inv = tf.math.reciprocal(r)

    def grad(dr, dinv):
        dr2 = dr * 0.5 * tf.math.rsqrt(r2) - dinv * 0.5 * tf.math.pow(r2, -1.5)
        return dr2 * 2 * x, dr2 * 2 * y

    return (r, inv), grad


@tf.custom_gradient
def scale_and_shift(x, scale, shift):
    out = x * scale + shift

    def grad(dy):
        return dy * scale, tf.reduce_sum(dy * x), tf.reduce_sum(dy)

    return out, grad


EXAMPLES = {
    "polar_stats": ([3.0, 1.0, -2.0], [4.0, -1.0, 0.5]),
    "scale_and_shift": ([1.0, -2.0, 0.5], 1.5, -0.25),
}
