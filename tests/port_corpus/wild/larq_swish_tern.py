"""Larq's SwishSign (a custom gradient defined inside the quantizer, with tf.cosh), the
ternarizer with its Ternary-Weight-Networks threshold, the 0/1 Heaviside and DoReFa's k-bit
quantizer, each a closure over the quantizer's arguments.

Source: larq/larq, larq/quantizers.py (Apache-2.0); `math.sign` is larq/math.py's, inlined.
"""

import tensorflow as tf


def sign(x):
    """A sign function that will never be zero"""
    return tf.sign(tf.sign(x) + 0.1)


def swish_sign(x, beta=5.0):
    @tf.custom_gradient
    def _call(x):
        def grad(dy):
            b_x = beta * x
            return dy * beta * (2 - b_x * tf.tanh(b_x * 0.5)) / (1 + tf.cosh(b_x))

        return sign(x), grad

    return _call(x)


def ste_tern(x, threshold_value=0.05, ternary_weight_networks=False, clip_value=1.0):
    x = tf.clip_by_value(x, -clip_value, clip_value)

    if ternary_weight_networks:
        threshold = 0.7 * tf.reduce_sum(tf.abs(x)) / tf.cast(tf.size(x), x.dtype)
    else:
        threshold = threshold_value

    @tf.custom_gradient
    def _ternarize_with_identity_grad(x):
        return (tf.sign(tf.sign(x + threshold) + tf.sign(x - threshold)), lambda dy: dy)

    return _ternarize_with_identity_grad(x)


def ste_heaviside(x, clip_value=1.0):
    x = tf.clip_by_value(x, -clip_value, clip_value)

    @tf.custom_gradient
    def _and_binarize_with_identity_grad(x):
        def grad(dy):
            return dy

        return tf.sign(tf.nn.relu(x)), grad

    return _and_binarize_with_identity_grad(x)


def dorefa_quantizer(x, k_bit=2):
    x = tf.clip_by_value(x, 0.0, 1.0)

    @tf.custom_gradient
    def _k_bit_with_identity_grad(x):
        n = 2**k_bit - 1
        return tf.round(x * n) / n, lambda dy: dy

    return _k_bit_with_identity_grad(x)


EXAMPLES = {
    "swish_sign": ([-1.5, -0.3, 0.0, 0.2, 0.9],),
    "ste_tern": ([-1.5, -0.3, 0.01, 0.2, 0.9], {"py": 0.05}, {"py": True}),
    "ste_heaviside": ([-1.5, -0.3, 0.0, 0.2, 1.9],),
    "dorefa_quantizer": ([-0.5, 0.1, 0.2, 0.45, 0.8, 1.3], {"py": 2}),
}
