"""TF1 spellings in a custom gradient (`compat.v1`): `to_float`, Python 2's `div`, the old
argument names `keep_dims`, `reduction_indices`, `dim` and `dimension`, and
`tensor_scatter_nd_update`/`add` in grad_fn."""

import tensorflow.compat.v1 as tf


@tf.custom_gradient
def legacy(x):
    y = tf.to_float(tf.div(x, 2.0)) + tf.to_float(tf.div(tf.constant([7, -7, 4]), 2))
    m = tf.reduce_mean(x, reduction_indices=[0], keep_dims=True)
    p = tf.nn.softmax(x, dim=0)
    i = tf.to_double(tf.argmax(x, dimension=0))

    def grad(dy):
        g = dy * tf.reduce_sum(p, axis=0, keep_dims=True) + m
        g = tf.tensor_scatter_nd_update(g, [[0]], [dy[0] * 2.0])
        return tf.tensor_scatter_nd_add(g, [[1], [1]], [dy[2], dy[1]])

    return tf.to_double(y) + i, grad


EXAMPLES = {"legacy": ([0.5, -1.0, 2.0],)}
