"""Activations from tf.nn with their arguments, inside custom gradients (a leaky hard
gradient, an elu whose gradient is clipped, gelu both ways, selu)."""

import tensorflow as tf


@tf.custom_gradient
def leaky_clip(x):
    y = tf.nn.leaky_relu(x, alpha=0.1)

    def grad(dy):
        slope = tf.where(x > 0, tf.ones_like(x), 0.1 * tf.ones_like(x))
        return tf.clip_by_value(dy * slope, -1.0, 1.0)

    return y, grad


def activations(x):
    return (
        tf.nn.elu(x)
        + tf.nn.selu(x)
        + tf.nn.leaky_relu(x)
        + tf.nn.gelu(x)
        + tf.nn.gelu(x, approximate=True)
        + tf.nn.relu6(x)
    )


EXAMPLES = {
    "leaky_clip": ([-20.0, -1.0, 0.0, 0.5, 15.0],),
    "activations": ([-3.0, -0.5, 0.0, 0.7, 6.0, 6.5],),
}
