"""Riptide's PACT activation quantisation: a clip to a learned `alpha` whose gradient reaches
`alpha` through the clipped elements (float32 masks), a uniform quantiser with a straight-through
gradient and `None` for `alpha` and the bit width, SAWB's symmetric weight quantiser, and the
Keras layer that builds `alpha` and applies them inside a `tf.name_scope`, writing summaries.

Source: jwfromm/Riptide, riptide/anneal/anneal_funcs.py (Apache-2.0 per the repository's README;
no license file in the indexed copy): `AlphaClip`, `AlphaQuantize`, `SAWBQuantize` and `PACT`.
`Config.current` (riptide/anneal/anneal_config.py, a stack of quantisation scopes) is reduced to
a class holding the three settings `PACT` reads, and `self.add_variable('alpha', ...)` (Keras 2's
spelling; Keras 3 takes the shape first) is written `self.add_weight(name='alpha', ...)`. The
`SAWBConv2D`/`SAWBDense` subclasses of Keras layers left out. `PACT` is kept but not exercised:
TF 2.21 refuses its call ("grad_fn must accept keyword argument 'variables', since function uses
variables"), as `alpha` reaches `AlphaClip` as an argument and is read as a variable.
"""

import tensorflow as tf


class Config:
    """Riptide's current quantisation scope, reduced to what PACT reads."""

    class current:
        quantize = True
        a_bits = 2
        fixed = False


@tf.custom_gradient
def AlphaClip(x, alpha):
    output = tf.clip_by_value(x, 0, alpha)

    def grad_fn(dy):
        x_grad_mask = tf.cast(tf.logical_and(x >= 0, x <= alpha), tf.float32)
        alpha_grad_mask = tf.cast(x >= alpha, tf.float32)
        alpha_grad = tf.reduce_sum(dy * alpha_grad_mask)
        x_grad = dy * x_grad_mask

        return [x_grad, alpha_grad]

    return output, grad_fn


@tf.custom_gradient
def AlphaQuantize(x, alpha, bits):
    output = tf.round(x * ((2**bits - 1) / alpha)) * (alpha / (2**bits - 1))

    def grad_fn(dy):
        return [dy, None, None]

    return output, grad_fn


class PACT(tf.keras.layers.Layer):
    def __init__(self, bits=None):
        super(PACT, self).__init__()
        self.scope = Config.current
        self.quantize = self.scope.quantize
        self.bits = bits
        if self.bits is None:
            self.bits = self.scope.a_bits
        self.fixed = self.scope.fixed

    def build(self, input_shape):
        if self.quantize:
            if self.fixed:
                self.alpha = 1.0
            else:
                self.alpha = self.add_weight(
                    name='alpha',
                    shape=[],
                    initializer=tf.initializers.Constant(10.),
                    regularizer=tf.keras.regularizers.l2(0.0002))

    def call(self, inputs):
        if self.quantize:
            outputs = AlphaClip(inputs, self.alpha)
            if not self.fixed:
                tf.summary.histogram('alpha', self.alpha)
            with tf.name_scope('QA'):
                outputs = AlphaQuantize(outputs, self.alpha, self.bits)
                tf.summary.histogram('activation', inputs)
                tf.summary.histogram('quantized_activation', outputs)
        else:
            outputs = tf.nn.relu(inputs)
        return outputs

    def get_config(self):
        return {'quantize': self.quantize, 'bits': self.bits}

    def compute_output_shape(self, input_shape):
        return input_shape


@tf.custom_gradient
def SAWBQuantize(x, alpha, bits):
    # Clip between -alpha and alpha
    clipped = tf.clip_by_value(x, -alpha, alpha)
    # Rescale to [0, alpha]
    scaled = (clipped + alpha) / 2.
    # Quantize.
    quantized = tf.round(scaled * ((2**bits - 1) / alpha)) * (alpha /
                                                              (2**bits - 1))
    # Rescale to negative range.
    output = (2 * quantized) - alpha

    def grad_fn(dy):
        return [dy, None, None]

    return output, grad_fn


KERAS_FLOATX = "float32"


def f32(values):
    return {"tensor": values, "dtype": "float32"}


EXAMPLES = {
    "AlphaClip": (f32([-0.5, 0.3, 1.2, 2.5]), f32(1.5)),
    "AlphaQuantize": (f32([0.1, 0.4, 0.9, 1.4]), f32(1.5), {"py": 2}),
    "SAWBQuantize": (f32([-2.0, -0.4, 0.3, 1.1]), f32(1.0), {"py": 3}),
}
