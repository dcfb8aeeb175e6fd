"""GradientTapes inside custom gradients: recomputing the forward in the gradient function
(memory saving), a derivative computed in the forward pass, and a gradient penalty."""

import tensorflow as tf


def recompute_grad(fn):
    """Keep no activations: the gradient function runs fn again under a tape."""

    @tf.custom_gradient
    def wrapped(x):
        y = fn(x)

        def grad(dy):
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = fn(x)
            return tape.gradient(y, x, output_gradients=dy)

        return y, grad

    return wrapped


def _block(x):
    return tf.nn.softplus(x) * tf.tanh(x)


def recomputed_block(x):
    return recompute_grad(_block)(x)


@tf.custom_gradient
def smooth_abs(x):
    with tf.GradientTape() as g:
        g.watch(x)
        y = tf.sqrt(tf.square(x) + 1.0) - 1.0
    dydx = g.gradient(y, x)

    def grad(dy):
        return dy * dydx

    return y, grad


def penalty(x, w):
    """A gradient penalty: the squared norm of d(score)/dx, differentiable in x and w."""
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        score = tf.reduce_sum(tf.sin(x * w))
    dx, dw = tape.gradient(score, [x, w])
    return tf.reduce_sum(tf.square(dx)) + 0.1 * tf.reduce_sum(tf.square(dw))


EXAMPLES = {
    "recomputed_block": ([-2.0, -0.5, 0.0, 1.0, 3.0],),
    "smooth_abs": ([-2.0, -0.5, 0.0, 1.0, 3.0],),
    "penalty": ([0.5, -1.0, 2.0], [1.5, 0.25, -0.5]),
}
