"""LibSPN-Keras's soft-EM gradient: a custom gradient defined inside a function, closed over its
`axis` argument, whose forward is the log-softmax of the log of linear accumulators and whose
backward passes the upstream gradient straight to the accumulators.

Source: pronobis/libspn-keras, libspn_keras/math/soft_em_grads.py (MIT).
"""

import tensorflow as tf


def log_softmax_with_soft_em_grad(accumulator, axis=None):
    """
    Implements custom gradient to pass on the weight grads to an accumulator

    Args:
        accumulator: A `Tensor` holding the weight accumulator in linear space
        axis: Axis to reduce log softmax

    Returns:
        A `Tensor` containing normalized logspace weights
    """

    @tf.custom_gradient
    def _inner(accumulator):

        def grad(dy):
            return dy

        out = tf.nn.log_softmax(tf.math.log(accumulator), axis=axis)

        return out, grad

    return _inner(accumulator)


EXAMPLES = {
    "log_softmax_with_soft_em_grad": (
        [[0.5, 1.0, 2.0], [3.0, 0.25, 1.5]],
    ),
}
