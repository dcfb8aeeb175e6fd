"""Losses and dtypes as custom-gradient code meets them: TF2's softmax cross-entropy (labels that
do not sum to 1 show TF's `softmax - labels` gradient), a log-sum-exp with `tf.newaxis`, an
argmax one-hot with a depth read from `tf.shape`, NumPy constants and `tf.dtypes.as_dtype`, a
keyword argument of f, and a Hessian-vector product through nested tapes."""

import numpy as np
import tensorflow as tf


def xent(logits, labels):
    return tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits, axis=-1)


@tf.custom_gradient
def logsumexp(x):
    m = tf.math.reduce_max(x, axis=-1, keepdims=True)
    e = tf.exp(x - m)
    s = tf.math.reduce_sum(e, axis=-1, keepdims=True)

    def grad(dy):
        return dy[..., tf.newaxis] * e / s

    return tf.squeeze(m, -1) + tf.math.log(tf.squeeze(s, -1)), grad


@tf.custom_gradient
def hard_max(x):
    idx = tf.argmax(x, axis=-1, output_type=tf.int32)
    one_hot = tf.one_hot(idx, depth=tf.shape(x)[-1], dtype=x.dtype)

    def grad(dy):
        return dy[..., None] * one_hot

    return tf.reduce_max(x, axis=-1), grad


@tf.custom_gradient
def numpy_constants(x):
    c = tf.constant(np.array([1.0, 2.0, 3.0]), dtype=x.dtype)
    size = x.get_shape().as_list()[-1]
    dtype = tf.dtypes.as_dtype("float64")

    def grad(dy):
        return dy * c * tf.cast(size, dy.dtype)

    return tf.cast(x, dtype) * c, grad


@tf.custom_gradient
def scaled(x, scale=2.0):
    def grad(dy):
        return dy * scale

    return x * scale, grad


def hessian_vector(x, v):
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            y = tf.reduce_sum(tf.sin(x) * x)
        g = inner.gradient(y, x)
        gv = tf.reduce_sum(g * v)
    return outer.gradient(gv, x)


EXAMPLES = {
    "xent": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], [[0.2, 0.3, 0.9], [0.0, 1.0, 0.0]]),
    "logsumexp": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
    "hard_max": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
    "numpy_constants": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
    "scaled": ([0.5, -1.0],),
    "hessian_vector": ([0.5, -1.0, 2.0], [1.5, 0.25, -0.75]),
}
