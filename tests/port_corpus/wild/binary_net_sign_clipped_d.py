"""BinaryNet's sign with a straight-through gradient, a second custom gradient that cancels it
outside [-1, 1] by wrapping the first (a custom gradient calling another).

Source: vadimq/binary-net, binary_net.py (BSD-3-Clause), the version with `sign_clipped_d`; the
weight-clip constraint and the Keras `Dense` subclass left out (the subclass passes its kernel
variable to `sign`, which TF 2.21 refuses: "grad_fn must accept keyword argument 'variables'").
"""

import tensorflow as tf
# tf.enable_eager_execution()

@tf.custom_gradient
def sign(x):
    def grad(dy):
        return dy
    return tf.where(x < 0, -tf.ones_like(x), tf.ones_like(x)), grad

@tf.custom_gradient
def sign_clipped_d(x):
    def grad(dy):
        return tf.where(tf.abs(x) <= 1, dy, tf.zeros_like(x))
    return sign(x), grad


EXAMPLES = {
    "sign": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
    "sign_clipped_d": ([-1.5, -0.5, 0.0, 0.7, 2.0],),
}
