"""Behavior Regularized Actor Critic's utilities: a stable log(1 + exp(x)), and relu and clipping
whose gradients let an update that moves a value back into range through (float32 masks,
`compat.v1` import). `clip_v2` returns one gradient for its three inputs, which TF 2.21 refuses
("expected to return 3 gradients"), so it is translated but has no example.

Source: google-research/google-research, behavior_regularized_offline_rl/brac/utils.py
(Apache-2.0); the summary, optimizer and checkpoint helpers left out.
"""

import tensorflow.compat.v1 as tf


def soft_relu(x):
    """Compute log(1 + exp(x))."""
    # Note: log(sigmoid(x)) = x - soft_relu(x) = - soft_relu(-x).
    #       log(1 - sigmoid(x)) = - soft_relu(x)
    return tf.log(1.0 + tf.exp(-tf.abs(x))) + tf.maximum(x, 0.0)


@tf.custom_gradient
def relu_v2(x):
    """Relu with modified gradient behavior."""
    value = tf.nn.relu(x)

    def grad(dy):
        if_y_pos = tf.cast(tf.greater(dy, 0.0), tf.float32)
        if_x_pos = tf.cast(tf.greater(x, 0.0), tf.float32)
        return (if_y_pos * if_x_pos + (1.0 - if_y_pos)) * dy

    return value, grad


@tf.custom_gradient
def clip_v2(x, low, high):
    """Clipping with modified gradient behavior."""
    value = tf.minimum(tf.maximum(x, low), high)

    def grad(dy):
        if_y_pos = tf.cast(tf.greater(dy, 0.0), tf.float32)
        if_x_g_low = tf.cast(tf.greater(x, low), tf.float32)
        if_x_l_high = tf.cast(tf.less(x, high), tf.float32)
        return (if_y_pos * if_x_g_low + (1.0 - if_y_pos) * if_x_l_high) * dy

    return value, grad


def f32(values):
    return {"tensor": values, "dtype": "float32"}


EXAMPLES = {
    "soft_relu": ([-30.0, -1.0, 0.0, 2.0, 40.0],),
    "relu_v2": (f32([-1.5, -0.2, 0.3, 2.0]),),
}
