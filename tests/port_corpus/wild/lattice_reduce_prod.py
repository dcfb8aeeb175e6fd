"""TensorFlow Lattice's `reduce_prod` with a faster custom gradient: the product divided by each
element, and for a slice with exactly one zero the product of the others at that zero (float32
masks, so float32 inputs).

Source: tensorflow/lattice, tensorflow_lattice/python/kronecker_factored_lattice_lib.py
(Apache-2.0); the lattice evaluation functions left out.
"""

import tensorflow as tf


def custom_reduce_prod(t, axis):
    """tf.reduce_prod(t, axis) with faster custom gradient.

    Shows comparable speed on CPU, up to 2x speed up on GPU, and 7x on TPU.
    """

    @tf.custom_gradient
    def fn(t):
        # Can safely use the built in forward op.
        fwd = tf.reduce_prod(t, axis=axis)

        def grad_fn(dy):
            """Computes the gradient function."""
            is_zero = tf.cast(tf.equal(t, 0), tf.float32)
            num_zeros = tf.reduce_sum(is_zero, axis=axis)

            # If the product contains no zero elements, then simply divide the
            # product by each element to determine the partial gradients.
            grad0 = tf.math.divide_no_nan(tf.expand_dims(fwd, axis=axis), t)

            # If the product contained one zero element, then compute the gradient
            # for that zero element. The gradients for other elements should be
            # zero.
            prod = tf.reduce_prod(t + is_zero, axis=axis)
            grad1 = tf.cast(tf.equal(num_zeros, 1), tf.float32) * prod
            grad1 = tf.expand_dims(grad1, axis=axis) * is_zero

            return tf.expand_dims(dy, axis=axis) * (grad0 + grad1)

        return fwd, grad_fn

    return fn(t)


EXAMPLES = {
    "custom_reduce_prod": (
        {"tensor": [[1.5, -2.0, 0.5], [0.0, 3.0, 2.0], [0.0, 0.0, 4.0]], "dtype": "float32"},
        {"py": 1},
    ),
}
