"""StyleGAN's leaky ReLU, written against `tensorflow.compat.v1`: a custom gradient whose gradient
function is itself a custom gradient (so the second order is the same mask again), inside a
`tf.variable_scope`, with `alpha` made a constant of the input's dtype; and the pixelwise feature
normalisation next to it (`tf.rsqrt`, plain autodiff).

Source: NVlabs/stylegan, training/networks_stylegan.py (CC BY-NC 4.0): `leaky_relu` and
`pixel_norm`; `tf.disable_v2_behavior()` left out (it switches the whole process to graph mode),
as are the networks and the ops that need `dnnlib`.
"""

import numpy as np
import tensorflow.compat.v1 as tf

#----------------------------------------------------------------------------
# Leaky ReLU activation. More efficient than tf.nn.leaky_relu() and supports FP16.

def leaky_relu(x, alpha=0.2):
    with tf.variable_scope('LeakyReLU'):
        alpha = tf.constant(alpha, dtype=x.dtype, name='alpha')
        @tf.custom_gradient
        def func(x):
            y = tf.maximum(x, x * alpha)
            @tf.custom_gradient
            def grad(dy):
                dx = tf.where(y >= 0, dy, dy * alpha)
                return dx, lambda ddx: tf.where(y >= 0, ddx, ddx * alpha)
            return y, grad
        return func(x)

#----------------------------------------------------------------------------
# Pixelwise feature vector normalization.

def pixel_norm(x, epsilon=1e-8):
    with tf.variable_scope('PixelNorm'):
        epsilon = tf.constant(epsilon, dtype=x.dtype, name='epsilon')
        return x * tf.rsqrt(tf.reduce_mean(tf.square(x), axis=1, keepdims=True) + epsilon)


EXAMPLES = {
    "leaky_relu": ([[-2.0, -0.5, 0.25], [1.5, -3.0, 0.75]],),
    "pixel_norm": ([[[0.5, -1.0], [2.0, 0.25]], [[-1.5, 0.75], [0.3, 1.2]]],),
}
