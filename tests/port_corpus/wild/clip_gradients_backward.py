"""An identity whose backward pass clips the upstream gradient to norm 0.5, applied to `v * v`
as in TensorFlow's guide on custom gradients.

Source: andremfreitas/ml, autodiff/advanced/custom_grad.py. No license file in the indexed copy.
"""

import tensorflow as tf


# Establish an identity operation, but clip during the gradient pass.
@tf.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return tf.clip_by_norm(dy, 0.5)

    return y, backward


def square_then_clip(v):
    return clip_gradients(v * v)


EXAMPLES = {"clip_gradients": ([2.0, -1.0, 0.5],), "square_then_clip": ([2.0],)}
