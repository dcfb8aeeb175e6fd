"""TensorFlow Compression's `perturb_and_apply`: uniform noise on the first argument of a
pointwise function, with the expected derivative w.r.t. the noise as its gradient; the other
arguments' and the variables' gradients come from a persistent tape recorded in the forward pass
(`compat.v1` import, `grad(grad_ys, variables=None)`).

Source: tensorflow/compression, tensorflow_compression/python/ops/math_ops.py (Apache-2.0).
The noise `u` is passed in, so the example is deterministic.
"""

import tensorflow.compat.v1 as tf


def perturb_and_apply(f, x, *args, u=None, x_plus_u=None, expected_grads=True):
    if x_plus_u is None:
        if u is None:
            u = tf.random.uniform(tf.shape(x), minval=-0.5, maxval=0.5, dtype=x.dtype)
        x_plus_u = x + u
    elif u is not None:
        raise ValueError("Cannot provide both `u` and `x_plus_u`.")

    args = [tf.convert_to_tensor(arg) for arg in args]
    if not expected_grads:
        return f(x_plus_u, *args), x_plus_u

    @tf.custom_gradient
    def _perturb_and_apply(x, *args):
        tape = tf.GradientTape(persistent=True)
        with tape:
            tape.watch(args)
            y = f(x_plus_u, *args)

        # The expected derivative of f with respect to x
        dydx = f(x + 0.5, *args) - f(x - 0.5, *args)

        def grad(grad_ys, variables=None):
            # Calculate gradients of other variables as usual
            if variables is None:
                variables = []
            grad_args, grad_vars = tape.gradient(y, (args, variables), output_gradients=grad_ys)
            return [grad_ys * dydx] + list(grad_args), grad_vars

        return y, grad

    return _perturb_and_apply(x, *args), x_plus_u


def scaled_sine(x, scale, u):
    return perturb_and_apply(lambda v, s: tf.sin(v) * s, x, scale, u=u)


EXAMPLES = {
    "scaled_sine": ([0.1, -0.7, 1.3], [2.0, 0.5, -1.0], [0.2, -0.4, 0.1]),
}
