"""Tapes as real custom gradients write them: a persistent tape made before its `with`, watching
a `*args` tuple, read in grad_fn with nested sources and grad_fn's `variables`; and Keras's
`ReLU` layer with its arguments and `tf.keras.activations.relu`."""

import tensorflow as tf

scale = tf.Variable([1.5, -0.5, 2.0], dtype=tf.float64)


def expected_gradient(x, *args):
    @tf.custom_gradient
    def apply(x, *args):
        tape = tf.GradientTape(persistent=True)
        with tape:
            tape.watch(args)
            y = tf.sin(x) * args[0] * scale + args[1]
        slope = tf.cos(x) * 0.5

        def grad(dy, variables=None):
            if variables is None:
                variables = []
            grad_args, grad_vars = tape.gradient(y, (args, variables), output_gradients=dy)
            return [dy * slope, *grad_args], grad_vars

        return y, grad

    return apply(x, *args)


def keras_relus(x):
    relu6 = tf.keras.layers.ReLU(max_value=6.0, threshold=0.5, dtype="float64")
    leaky = tf.keras.layers.ReLU(negative_slope=0.2, threshold=1.0, dtype="float64")
    softmax = tf.keras.layers.Softmax(axis=0, dtype="float64")
    return (
        relu6(x)
        + leaky(x)
        + tf.keras.layers.LeakyReLU(negative_slope=0.1, dtype="float64")(x)
        + tf.keras.activations.relu(x, max_value=1.0)
        + softmax(x)
    )


EXAMPLES = {
    "expected_gradient": ([0.1, -0.7, 1.3], [2.0, 0.5, -1.0], [0.2, -0.4, 0.1]),
    "keras_relus": ([-1.5, 0.5, 0.7, 1.0, 2.0, 6.0, 7.0],),
}
