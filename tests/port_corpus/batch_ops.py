"""Shape plumbing of real custom gradients: tf.shape(x)[0], reshape with -1, transpose
with perm, tile, range, gather, and a mask from comparisons."""

import tensorflow as tf


@tf.custom_gradient
def flatten_scale(x):
    batch = tf.shape(x)[0]
    flat = tf.reshape(x, [batch, -1])
    scale = tf.cast(tf.range(1, tf.shape(flat)[1] + 1), x.dtype)

    def grad(dy):
        return tf.reshape(dy * scale, tf.shape(x))

    return flat * scale, grad


def pick_rows(x, idx):
    rows = tf.gather(x, idx)
    t = tf.transpose(rows, perm=[1, 0])
    return tf.tile(t, [1, 2]) * tf.cast(x.shape[0], x.dtype)


def masks(x, y):
    any_big = tf.reduce_any(tf.greater(x, 1.5), axis=1)
    all_pos = tf.reduce_all(x > 0, axis=1)
    fin = tf.math.is_finite(x)
    both = tf.logical_or(any_big, all_pos)
    return tf.where(tf.expand_dims(both, 1) & fin, x * y, tf.zeros_like(x)), tf.logical_not(both)


EXAMPLES = {
    "flatten_scale": ([[[1.0, 2.0], [3.0, 4.0]], [[-1.0, 0.5], [0.0, 2.0]]],),
    "pick_rows": ([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], {"py": [2, 0]}),
    "masks": ([[1.0, 2.0], [-1.0, 0.5], [0.2, 0.3]], [[2.0, 3.0], [4.0, 5.0], [6.0, 7.0]]),
}
