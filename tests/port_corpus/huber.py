"""Smooth L1 (Huber) loss per element, with the clipped residual as its gradient."""

import tensorflow as tf

DELTA = 1.0


@tf.custom_gradient
def huber(residual):
    a = tf.abs(residual)
    quadratic = 0.5 * tf.square(residual)
    linear = DELTA * (a - 0.5 * DELTA)
    loss = tf.where(a <= DELTA, quadratic, linear)

    def grad(dy):
        return dy * tf.clip_by_value(residual, -DELTA, DELTA)

    return loss, grad


EXAMPLES = {"huber": ([-3.0, -1.0, -0.25, 0.0, 0.5, 1.0, 2.5],)}
