"""Gradient reversal layer for domain-adversarial training (DANN), as the public
implementations write it: a flip with a trade-off weight, defined inside a helper."""

import tensorflow as tf


def flip_gradient(x, l=1.0):  # noqa: E741 (as the DANN implementations name it)
    """Identity forward; the gradient is multiplied by -l on the way back."""

    @tf.custom_gradient
    def _flip_gradients(x):
        def grad(dy):
            return tf.negative(dy) * l

        return tf.identity(x), grad

    return _flip_gradients(x)


def reverse_gradient(x, hp_lambda):
    @tf.custom_gradient
    def reverse(x):
        def custom_grad(dy):
            return tf.math.negative(dy) * hp_lambda

        y = tf.identity(x)
        return y, custom_grad

    return reverse(x)


EXAMPLES = {
    "flip_gradient": ([[0.5, -1.0, 2.0], [0.0, 3.0, -0.25]], {"py": 0.3}),
    "reverse_gradient": ([1.0, -2.0, 0.5], {"py": 2.0}),
}
