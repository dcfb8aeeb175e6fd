"""A fake-quantization layer as Keras 3 code has it: registered for serialization, imported
as `from tensorflow.keras.layers import Layer`, a non-trainable moving maximum updated with
`assign` in `call` (training only), a straight-through custom gradient, an activation looked up
with `tf.keras.activations.get`, inside a subclassed `tf.keras.Model`."""

import tensorflow as tf
from tensorflow.keras.layers import Dense, Layer


@tf.custom_gradient
def fake_quantize(x, scale):
    q = tf.round(tf.clip_by_value(x / scale, -8.0, 7.0)) * scale

    def grad(dy):
        inside = tf.cast(tf.abs(x) <= 8.0 * scale, dy.dtype)
        return dy * inside, tf.reduce_sum(dy * (q - x) / scale)

    return q, grad


@tf.keras.utils.register_keras_serializable(package="corpus")
class MovingMaxQuantizer(Layer):
    def __init__(self, momentum=0.9, activation="tanh", **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.activation = tf.keras.activations.get(activation)

    def build(self, input_shape):
        self.moving_max = self.add_weight(
            name="moving_max", shape=(), initializer="ones", trainable=False
        )

    def call(self, inputs, training=None):
        if training:
            current = tf.reduce_max(tf.abs(inputs))
            self.moving_max.assign(
                self.momentum * self.moving_max + (1.0 - self.momentum) * current
            )
        scale = self.moving_max / 7.0
        return self.activation(fake_quantize(inputs, scale))

    def get_config(self):
        return {**super().get_config(), "momentum": self.momentum}


class TinyModel(tf.keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = Dense(3, kernel_initializer="ones", dtype="float64")
        self.quantizer = MovingMaxQuantizer(dtype="float64")

    def call(self, x, training=None):
        return self.quantizer(self.dense(x), training=training)


model = TinyModel(dtype="float64")


def quantized_model(x):
    return model(x, training=True), model.quantizer.moving_max + 0.0


EXAMPLES = {"quantized_model": ([[0.3, -1.2], [2.5, 0.7]],)}
