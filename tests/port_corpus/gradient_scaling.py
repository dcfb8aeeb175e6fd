"""Scale the gradient by a factor (a Python number: its gradient slot is None)."""

import tensorflow as tf


@tf.custom_gradient
def scale_gradient(x, scale):
    def grad(dy):
        return dy * scale, None

    return tf.identity(x), grad


def block(x):
    # a recomputed block: its intermediates are not kept for backward
    return tf.recompute_grad(lambda t: tf.nn.relu(t) * tf.tanh(t))(x)


EXAMPLES = {
    "scale_gradient": ([[1.0, -2.0], [0.5, 4.0]], {"py": 0.1}),
    "block": ([-1.0, 0.0, 0.5, 2.0],),
}
