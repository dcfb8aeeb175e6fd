"""TensorFlow Probability's Sigmoid bijector helpers: a stable sigmoid (exp(x) below a cutoff)
and the stable-gradient softplus it uses for log-det-Jacobians, both defined under a
module-level `if JAX_MODE: ... else:`.

Source: tensorflow/probability, tensorflow_probability/python/bijectors/sigmoid.py
(Apache-2.0); the Sigmoid bijector class left out, `forward_log_det_jacobian` reduced to the
expression its standard case computes.
"""

import tensorflow.compat.v2 as tf

JAX_MODE = False  # Overwritten by rewrite script.

# TODO(b/155501444): Remove when tf.math.sigmoid and tf.nn.softplus are fixed.
if JAX_MODE:
    _stable_sigmoid = tf.math.sigmoid
    _stable_grad_softplus = tf.nn.softplus
else:

    def _stable_sigmoid(x):
        """A (more) numerically stable sigmoid than `tf.math.sigmoid`."""
        x = tf.convert_to_tensor(x)
        if x.dtype == tf.float64:
            cutoff = -20
        else:
            cutoff = -9
        return tf.where(x < cutoff, tf.exp(x), tf.math.sigmoid(x))

    @tf.custom_gradient
    def _stable_grad_softplus(x):
        """A (more) numerically stable softplus than `tf.nn.softplus`."""
        x = tf.convert_to_tensor(x)
        if x.dtype == tf.float64:
            cutoff = -20
        else:
            cutoff = -9

        y = tf.where(x < cutoff, tf.math.log1p(tf.exp(x)), tf.nn.softplus(x))

        def grad_fn(dy):
            return dy * tf.where(x < cutoff, tf.exp(x), tf.nn.sigmoid(x))

        return y, grad_fn


def forward_log_det_jacobian(x):
    return -_stable_grad_softplus(-x) - _stable_grad_softplus(x)


EXAMPLES = {
    "_stable_sigmoid": ([-30.0, -1.0, 0.0, 3.0],),
    "forward_log_det_jacobian": ([-30.0, -1.0, 0.0, 3.0, 25.0],),
}
