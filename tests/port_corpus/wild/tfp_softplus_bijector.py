"""TensorFlow Probability's numerically stable softplus for its Softplus bijector: log1p(exp(x))
below a dtype-dependent cutoff, with a gradient that is exp(x) there and sigmoid(x) elsewhere,
defined in the `else` branch of a module-level `if JAX_MODE:`.

Source: tensorflow/probability, tensorflow_probability/python/bijectors/softplus.py
(Apache-2.0); the Softplus bijector class left out.
"""

import tensorflow.compat.v2 as tf

JAX_MODE = False  # Overwritten by rewrite script.


# TODO(b/155501444): Remove this when tf.nn.softplus is fixed.
if JAX_MODE:
    _stable_grad_softplus = tf.nn.softplus
else:

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


EXAMPLES = {"_stable_grad_softplus": ([-40.0, -21.0, -3.0, 0.0, 2.5, 50.0],)}
