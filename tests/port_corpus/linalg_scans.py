"""Linear algebra and scans in custom gradients, as FermiNet-style code writes them: a
determinant through an SVD with `tf.linalg.set_diag` and band parts, exclusive and reverse
cumulative sums over an axis computed at run time, `slogdet`, `det`, and the name and device
scopes that change no number (`compat.v1` spellings beside TF2's)."""

import tensorflow as tf


@tf.custom_gradient
def svd_determinant(x):
    with tf.name_scope("svd_determinant"):
        with tf.device("/cpu:0"):
            s, u, v = tf.linalg.svd(x)
        sign = tf.linalg.slogdet(x)[0]

        def grad(dy):
            ss = tf.tile(s[..., None], len(s.shape) * [1] + [s.shape[-1]])
            ss = tf.linalg.set_diag(ss, tf.ones_like(s))
            z = tf.reduce_prod(ss, axis=-2)
            adj = tf.matmul(u, tf.matmul(tf.linalg.diag(z), v, transpose_b=True))
            return (sign * dy)[..., None, None] * adj

        return sign * tf.reduce_prod(s, axis=-1), grad


def singular_values(x):
    return tf.linalg.svd(x, compute_uv=False) + tf.linalg.det(x) + tf.linalg.slogdet(x)[1]


def scans(x):
    axis = len(x.shape) - 1
    lower = tf.cumsum(x, axis=axis, exclusive=True)
    upper = tf.cumsum(x, axis=-1, exclusive=True, reverse=True)
    back = tf.cumsum(x, axis, reverse=True)
    products = tf.math.cumprod(x, axis=0, exclusive=True)
    return lower * upper + back + products


def bands(x):
    upper = tf.linalg.band_part(x, 0, -1)
    lower = tf.linalg.band_part(x, -1, 0)
    tridiagonal = tf.linalg.band_part(x, 1, 1)
    return tf.linalg.set_diag(upper, tf.zeros_like(tf.linalg.diag_part(x))) + lower * tridiagonal


def eager_branch(x):
    if tf.executing_eagerly():
        return tf.exp(x)
    return tf.sin(x)


X = [[2.0, 0.5, -0.3], [0.1, 1.5, 0.4], [-0.7, 0.2, 1.1]]

EXAMPLES = {
    "svd_determinant": ([X, [[0.3, -1.2, 0.8], [1.4, 0.6, -0.5], [0.2, 0.9, 2.0]]],),
    "singular_values": (X,),
    "scans": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
    "bands": (X,),
    "eager_branch": ([0.5, -1.0],),
}
