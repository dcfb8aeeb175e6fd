"""BinaryNet's sign with a straight-through gradient whose clipping is a Python keyword argument
of the custom-gradient function (`clip=False`: identity gradient; `clip=True`: zero outside
[-1, 1]). The example passes `clip=True`.

Source: vadimq/binary-net, binary_net.py (BSD-3-Clause), the version with `sign(x, clip=False)`
(commit 0412e635); the weight-clip constraint left out.
"""

import tensorflow as tf
# tf.enable_eager_execution()

@tf.custom_gradient
def sign(x, clip=False):
    def grad(dy):
        return tf.where(tf.abs(x) <= 1, dy, tf.zeros_like(x)) if clip else dy
    return tf.where(x < 0, -tf.ones_like(x), tf.ones_like(x)), grad
# print(sign(0))


EXAMPLES = {"sign": {"call": ([-1.5, -0.5, 0.0, 0.7, 2.0],), "call_kwargs": {"clip": True}}}
