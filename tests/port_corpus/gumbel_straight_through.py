"""Straight-through Gumbel-softmax: the one-hot of the argmax forward, the softmax's
gradient backward (the noise is an input, so the numbers are reproducible)."""

import tensorflow as tf


def gumbel_softmax_sample(logits, noise, temperature):
    y = logits + noise
    return tf.nn.softmax(y / temperature)


@tf.custom_gradient
def st_one_hot(y):
    k = tf.shape(y)[-1]
    y_hard = tf.one_hot(tf.argmax(y, axis=-1), k, dtype=y.dtype)

    def grad(dy):
        return dy

    return y_hard, grad


def gumbel_softmax(logits, noise, temperature=0.5, hard=True):
    y = gumbel_softmax_sample(logits, noise, temperature)
    if hard:
        y_hard = tf.cast(tf.equal(y, tf.reduce_max(y, 1, keepdims=True)), y.dtype)
        y = tf.stop_gradient(y_hard - y) + y
    return y


def gumbel_st(logits, noise):
    return st_one_hot(gumbel_softmax_sample(logits, noise, 0.5))


EXAMPLES = {
    "gumbel_softmax": ([[1.0, 2.0, 0.5], [0.1, -1.0, 0.3]], [[0.2, -0.1, 0.4], [0.0, 0.3, -0.2]]),
    "gumbel_st": ([[1.0, 2.0, 0.5], [0.1, -1.0, 0.3]], [[0.2, -0.1, 0.4], [0.0, 0.3, -0.2]]),
}
