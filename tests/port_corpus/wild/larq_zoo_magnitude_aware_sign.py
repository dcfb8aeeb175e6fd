"""DoReFa-Net's weight quantizer in Larq Zoo: sign times the stopped mean absolute value, with
an identity pseudo-gradient, the custom gradient a closure over the scale factor.

Source: larq/zoo, larq_zoo/literature/dorefanet.py (Apache-2.0); `lq.math.sign` (larq/math.py)
inlined, the Keras registration decorators left out.
"""

import tensorflow as tf


def sign(x):
    """A sign function that will never be zero"""
    return tf.sign(tf.sign(x) + 0.1)


def magnitude_aware_sign_unclipped(x):
    """
    Scaled sign function with identity pseudo-gradient as used for the weights
    in the DoReFa paper. The Scale factor is calculated per layer.
    """
    scale_factor = tf.stop_gradient(tf.reduce_mean(tf.abs(x)))

    @tf.custom_gradient
    def _magnitude_aware_sign(x):
        return sign(x) * scale_factor, lambda dy: dy

    return _magnitude_aware_sign(x)


def clip_by_value_activation(x):
    return tf.clip_by_value(x, 0, 1)


EXAMPLES = {
    "magnitude_aware_sign_unclipped": ([[0.5, -1.5, 0.25], [-0.2, 0.0, 2.0]],),
}
