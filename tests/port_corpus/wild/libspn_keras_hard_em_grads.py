"""LibSPN-Keras's hard-EM gradient for a log-space product with normalised sum weights: the
forward adds the log-softmax of the accumulators (broadcast over the batch), the backward passes
the upstream gradient to the child and its column sums, reshaped with `tf.size`, to the
accumulators.

Source: pronobis/libspn-keras, libspn_keras/math/hard_em_grads.py (MIT), `logmultiply_hard_em`;
`logmatmul_hard_em_through_grads_from_accumulators` (which samples with `tf.random.categorical`)
left out.
"""

import tensorflow as tf


def logmultiply_hard_em(child_log_prob, accumulators):

    @tf.custom_gradient
    def _inner_fn(child_log_prob, accumulators):
        out = child_log_prob + tf.expand_dims(tf.nn.log_softmax(accumulators), axis=0)

        def grad(dy):
            return dy, tf.reduce_sum(tf.reshape(dy, (-1, tf.size(accumulators))), axis=0)

        return out, grad

    return _inner_fn(child_log_prob, accumulators)


EXAMPLES = {
    "logmultiply_hard_em": (
        [[-0.5, -1.0, -2.0], [-0.25, -3.0, -0.75]],
        [0.5, 1.0, -0.5],
    ),
}
