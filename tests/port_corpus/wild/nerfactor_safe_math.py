"""NeRFactor's numerically safe inverse trigonometry: atan2 whose gradient stays finite at
(0, 0) and acos whose gradient stays finite (and large) at +/-1, each with an `eps` keyword
default that is not differentiated.

Source: google/nerfactor, nerfactor/util/math.py (Apache-2.0); the sampling helpers left out.
"""

import tensorflow as tf


def log10(x):
    num = tf.math.log(x)
    denom = tf.math.log(tf.constant(10, dtype=num.dtype))
    return num / denom


@tf.custom_gradient
def safe_atan2(x, y, eps=1e-6):
    """Numerically stable version to safeguard against (0, 0) input, which
    causes the backward of tf.atan2 to go NaN.
    """
    z = tf.atan2(x, y)

    def grad(dz):
        denom = x**2 + y**2
        denom += eps
        dzdx = y / denom
        dzdy = -x / denom
        return dz * dzdx, dz * dzdy

    return z, grad


@tf.custom_gradient
def safe_acos(x, eps=1e-6):
    """Numerically stable version to safeguard against +/-1 input, which
    causes the backward of tf.acos to go inf.

    Simply clipping the input at +/-1-/+eps gives 0 gradient at the clipping
    values, but analytically, the gradients there should be large.
    """
    x_clip = tf.clip_by_value(x, -1.0, 1.0)
    y = tf.acos(x_clip)

    def grad(dy):
        in_sqrt = 1.0 - x_clip**2
        in_sqrt += eps
        denom = tf.sqrt(in_sqrt)
        denom += eps
        dydx = -1.0 / denom
        return dy * dydx

    return y, grad


EXAMPLES = {
    "log10": ([0.5, 10.0, 250.0],),
    "safe_atan2": ([0.0, 1.0, -0.5, 2.0], [0.0, 1.0, 0.25, -1.0]),
    "safe_acos": ([-1.0, -0.3, 0.0, 0.8, 1.0],),
}
