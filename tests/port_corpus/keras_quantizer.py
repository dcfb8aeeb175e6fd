"""A learned-step quantizer as a Keras layer: `build` creates the step with `add_weight` (a
non-trainable counter beside it), `@tf.custom_gradient` decorates `call` itself, and grad_fn
returns the step's gradient through `variables=`; `get_config` is kept."""

import tensorflow as tf


class LearnedStepQuantizer(tf.keras.layers.Layer):
    def __init__(self, levels=2, **kwargs):
        super().__init__(**kwargs)
        self.levels = levels

    def build(self, input_shape):
        self.step = self.add_weight(
            name="step",
            shape=(input_shape[-1],),
            initializer=tf.keras.initializers.Constant(0.25),
            trainable=True,
        )
        self.calls = self.add_weight(name="calls", shape=(), initializer="zeros", trainable=False)

    @tf.custom_gradient
    def call(self, x):
        scaled = x / self.step
        q = tf.clip_by_value(tf.round(scaled), -self.levels, self.levels - 1)

        def grad(dy, variables=None):
            inside = tf.cast(tf.abs(scaled) <= self.levels, x.dtype)
            dstep = tf.reduce_sum(dy * (q - scaled * inside), axis=0)
            return dy * inside, [dstep]

        return q * self.step, grad

    def get_config(self):
        config = super().get_config()
        config.update({"levels": self.levels})
        return config


quantizer = LearnedStepQuantizer(dtype="float64")


def quantize(x):
    return quantizer(x)


EXAMPLES = {"quantize": ([[0.1, -0.3, 0.7], [-0.6, 0.4, 2.0]],)}
