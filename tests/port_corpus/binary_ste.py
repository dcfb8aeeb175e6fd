"""BinaryNet / XNOR-Net style binarization with a straight-through estimator (TF2 through
the compat.v2 module, as many ported TF1 repositories import it)."""

import tensorflow.compat.v2 as tf


def hard_sigmoid(x):
    return tf.clip_by_value((x + 1.0) / 2.0, 0.0, 1.0)


@tf.custom_gradient
def binarize(x):
    # sign with sign(0) = +1, as BinaryNet's deterministic binarization
    ones = tf.ones_like(x)
    b = tf.where(tf.greater_equal(x, 0.0), ones, -ones)

    def grad(dy):
        # the straight-through estimator cancels the gradient where |x| > 1
        mask = tf.logical_and(tf.greater_equal(x, -1.0), tf.less_equal(x, 1.0))
        return dy * tf.cast(mask, dy.dtype)

    return b, grad


@tf.custom_gradient
def binarize_scaled(w):
    """XNOR-Net: sign(w) times the mean absolute value of each row."""
    alpha = tf.reduce_mean(tf.abs(w), axis=1, keepdims=True)
    b = tf.sign(w) * alpha

    def grad(dy):
        return dy * hard_sigmoid(w) * (1.0 - hard_sigmoid(w)) * 4.0

    return b, grad


EXAMPLES = {
    "binarize": ([-1.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.0],),
    "binarize_scaled": ([[0.5, -1.5, 0.25], [-0.2, 0.0, 2.0]],),
}
