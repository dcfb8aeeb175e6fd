"""The long tail of real TensorFlow code: whole `tf.shape(x)`, `.shape.ndims`, a computed
`axis`, `isinstance` with TF's classes, Python numbers where TF takes them, `tf.convert_to_tensor`
of a non-literal, NHWC convolutions and pools with TF's SAME padding, integer-aware division
and floor modulo, and ops that are a helper call (`tf_compat_grad.tf_ops`) in the port."""

import tensorflow as tf


@tf.custom_gradient
def per_example_normalized(x):
    """Each example scaled by its mean square over every axis but the batch's."""
    n = x.shape.ndims
    axes = list(range(1, n))
    scale = tf.sqrt(tf.reduce_mean(tf.square(x), axis=axes, keepdims=True))
    y = x / scale

    def grad(dy):
        return tf.clip_by_norm(dy, 1.0) / scale

    return y, grad


def shape_as_tensor(x):
    size = tf.shape(x)
    return tf.cast(tf.reduce_prod(size), tf.float64) * x


def isinstance_and_numbers(x):
    assert isinstance(x, (tf.Tensor, tf.Variable))
    offset = tf.zeros_like(0.3) + tf.cast(tf.ones_like(2), tf.float32)
    converted = tf.convert_to_tensor(x)
    return converted * tf.cast(offset, tf.float64)


def conv_same_stride2(x, w):
    y = tf.nn.conv2d(x, w, strides=2, padding="SAME")
    return tf.nn.max_pool2d(y, ksize=2, strides=1, padding="SAME")


def avg_pool_same(x):
    return tf.nn.avg_pool2d(x, ksize=2, strides=2, padding="SAME")


def division_and_modulo(x):
    ints = tf.constant([7, -7, 6], dtype=tf.int32)
    ratio = tf.math.divide(ints, tf.constant([2, 2, 4], dtype=tf.int32))
    return ratio * x, tf.math.floormod(x, 0.75), tf.math.floordiv(ints, 2)


def elementwise_tail(x):
    return (
        tf.cosh(x) + tf.math.asinh(x) + tf.math.erfc(x) + tf.math.bessel_i1e(x),
        tf.math.xlogy(x + 1.5, x * x + 0.5),
        tf.nn.crelu(x),
    )


def special_tail(x):
    a = tf.constant([2.0, 0.5, 3.0], dtype=tf.float64)
    return (
        tf.math.erfcinv(x / 2.0 + 0.5),
        tf.math.igamma(a, x + 1.0) + tf.math.igammac(a, x * x + 0.1),
        tf.math.reduce_euclidean_norm(x, axis=0),
        tf.math.cumprod(x + 2.0),
        tf.math.real(x) + tf.math.conj(x),
    )


@tf.custom_gradient
def batch_norm_sparse_xent(logits):
    mean, variance = tf.nn.moments(logits, axes=[0])
    normed = tf.nn.batch_normalization(logits, mean, variance, 0.1, 2.0, 1e-3)
    labels = tf.constant([0, 2])
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=normed)

    def grad(dy):
        return tf.math.l2_normalize(tf.ones_like(logits) * dy[:, None], axis=1)

    return loss, grad


def split_and_stack(x):
    assert x.dtype.is_floating and x.dtype.base_dtype == tf.dtypes.float64
    first, second = tf.split(x, 2, axis=1)
    a, b, c = tf.split(x, [1, 2, 1], axis=1)
    rows = tf.unstack(x, axis=0)
    return first * second, a * tf.reduce_sum(b, axis=1, keepdims=True) + c, rows[0] * rows[1]


def _image(n, h, w, c, offset):
    return [
        [
            [
                [((i * 7 + j * 3 + k * 5 + m + offset) % 11) / 5.0 - 1.0 for m in range(c)]
                for k in range(w)
            ]
            for j in range(h)
        ]
        for i in range(n)
    ]


EXAMPLES = {
    "per_example_normalized": ([[[1.0, -2.0], [0.5, 3.0]], [[0.25, 1.0], [-1.0, 2.0]]],),
    "shape_as_tensor": ([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]],),
    "isinstance_and_numbers": ([1.0, -2.0, 0.5],),
    "conv_same_stride2": (_image(2, 5, 4, 3, 0), _image(3, 2, 3, 2, 4)),
    "avg_pool_same": (_image(1, 5, 3, 2, 1),),
    "division_and_modulo": ([1.5, -2.0, 0.3],),
    "elementwise_tail": ([-0.5, 0.25, 1.5],),
    "special_tail": ([-0.5, 0.25, 0.9],),
    "split_and_stack": ([[1.0, -2.0, 0.5, 3.0], [0.25, 1.5, -1.0, 2.0]],),
    "batch_norm_sparse_xent": ([[1.0, 2.0, -1.0], [0.5, -0.5, 3.0]],),
}
