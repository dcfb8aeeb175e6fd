"""A function that reads a tf.Variable: its gradient comes back through `variables=`."""

import tensorflow as tf

weights = tf.Variable(tf.constant([0.5, -1.5], dtype=tf.float64))


@tf.custom_gradient
def linear_poly(x):
    poly = weights[1] * x + weights[0]

    def grad_fn(dpoly, variables):
        grad_xs = dpoly * weights[1]
        dy_dw = dpoly * tf.stack([x**1, x**0])
        grad_vars = [tf.reduce_sum(tf.reshape(dy_dw, [2, -1]), axis=1)]
        return grad_xs, grad_vars

    return poly, grad_fn


EXAMPLES = {"linear_poly": ([1.0, 2.0, 3.0],)}
