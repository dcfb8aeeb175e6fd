"""DoReFa-Net quantizers: k-bit uniform quantization with a straight-through gradient."""

import tensorflow as tf


def quantize(x, k):
    n = float(2**k - 1)

    @tf.custom_gradient
    def _quantize(x):
        return tf.round(x * n) / n, lambda dy: dy

    return _quantize(x)


def quantize_weights(w, bitW=2):
    # tanh, rescale to [0, 1], quantize, back to [-1, 1]
    w = tf.tanh(w)
    w = w / tf.reduce_max(tf.abs(w)) * 0.5 + 0.5
    return 2 * quantize(w, bitW) - 1


@tf.custom_gradient
def quantize_activation(x):
    bits = 4
    levels = 2.0**bits - 1.0
    clipped = tf.clip_by_value(x, 0.0, 1.0)
    q = tf.round(clipped * levels) / levels

    def grad(dy):
        # pass the gradient only where the input was not clipped
        inside = tf.cast((x >= 0.0) & (x <= 1.0), dy.dtype)
        return dy * inside

    return q, grad


def ste_round(x):
    """The stop_gradient form of the straight-through estimator."""
    return x + tf.stop_gradient(tf.round(x) - x)


EXAMPLES = {
    "quantize_weights": ([[0.3, -1.2, 0.05], [2.0, -0.6, 0.0]], {"py": 2}),
    "quantize_activation": ([-0.5, 0.1, 0.4, 0.55, 0.9, 1.3],),
    "ste_round": ([0.2, 0.5, 1.5, -2.6, 3.49],),
}
