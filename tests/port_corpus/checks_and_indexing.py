"""What custom gradients do around their formulas: checks (`check_numerics`, `tf.debugging`
asserts, `ensure_shape`), `tf.cond` and `tf.nest` in grad_fn, indexing along an axis
(`gather`, `gather_nd`, `scatter_nd`, `boolean_mask`, `top_k`, `argsort`, `reverse`, `roll`),
`clip_by_global_norm`, and Keras's backend functions (`K.sum`, `K.clip`, `K.cast(..., floatx)`)."""

import tensorflow as tf
from tensorflow.keras import backend as K


@tf.custom_gradient
def checked_clip(x, y):
    tf.debugging.assert_equal(tf.shape(x), tf.shape(y))
    tf.debugging.assert_positive(tf.reduce_sum(tf.abs(x)) + 1.0)
    out = tf.cond(tf.reduce_sum(x) > 0, lambda: x * y, lambda: x - y)

    def grad(dy):
        dy = tf.debugging.check_numerics(dy, "upstream")
        grads = tf.nest.map_structure(lambda g: g * 2.0, [dy * y, dy * x])
        clipped, _ = tf.clip_by_global_norm(grads, 1.0)
        return [tf.ensure_shape(g, x.shape) for g in clipped]

    return out, grad


def indexing(x):
    a = tf.gather(x, [2, 0, 2], axis=1)
    b = tf.gather_nd(x, [[0, 1], [1, 2]])
    c = tf.scatter_nd([[1], [0], [1]], tf.stack([b[0] * x[0], b[1] * x[1], x[0]]), [2, 3])
    d = tf.boolean_mask(x, x > 0.0)
    values, indices = tf.math.top_k(x, k=2)
    e = tf.cast(tf.argsort(x, axis=-1, direction="DESCENDING"), x.dtype)
    f = tf.reverse(x, [1]) + tf.roll(x, 1, axis=1)
    n = tf.cast(tf.math.count_nonzero(x > 0.0), x.dtype)
    return (
        tf.reduce_sum(a) + tf.reduce_sum(c * x) + tf.reduce_sum(d) + n,
        tf.reduce_sum(values * tf.cast(indices, x.dtype), axis=-1, keepdims=True) + e + f,
    )


@tf.custom_gradient
def keras_backend(x):
    y = K.sum(K.square(x), axis=-1) + K.mean(K.clip(x, -1.0, 1.0)) + K.sqrt(x)[..., 0]

    def grad(dy):
        mask = K.cast(K.greater(x, 0.0), K.floatx())
        return K.expand_dims(dy, -1) * (K.sign(x) + K.maximum(x, 0.5) * K.cast(mask, x.dtype))

    return y, grad


EXAMPLES = {
    "checked_clip": ([0.5, -1.0, 2.0], [1.5, 0.25, -0.75]),
    "indexing": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
    "keras_backend": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],),
}
