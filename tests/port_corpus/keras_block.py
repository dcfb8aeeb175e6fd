"""Built-in Keras layers inside a custom one: a channels-last `Conv2D` (TF's SAME padding at
stride 2), `BatchNormalization` in training, `Flatten` and `Dense`, with a gradient-clipping
custom gradient between them; initialisers are functions, so the numbers are known."""

import math

import numpy as np
import tensorflow as tf


def _init(offset):
    def init(shape, dtype=None):
        values = 0.3 * np.sin(np.arange(math.prod(shape)) + offset).reshape(shape)
        return tf.constant(values, dtype=dtype)

    return init


@tf.custom_gradient
def clip_gradient(x):
    def grad(dy):
        return tf.clip_by_value(dy, -0.05, 0.05)

    return tf.identity(x), grad


class Block(tf.keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.conv = tf.keras.layers.Conv2D(
            4,
            3,
            strides=2,
            padding="same",
            activation="relu",
            kernel_initializer=_init(0),
            bias_initializer=_init(1),
            dtype="float64",
        )
        self.norm = tf.keras.layers.BatchNormalization(
            gamma_initializer=_init(2), beta_initializer=_init(3), dtype="float64"
        )
        self.flatten = tf.keras.layers.Flatten(dtype="float64")
        self.dense = tf.keras.layers.Dense(
            2, activation="tanh", kernel_initializer=_init(4), dtype="float64"
        )

    def call(self, x, training=None):
        h = self.norm(self.conv(x), training=training)
        return self.dense(clip_gradient(self.flatten(h)))


block = Block(dtype="float64")


def block_training(x):
    return block(x, training=True)


EXAMPLES = {
    "block_training": (np.sin(np.arange(2 * 5 * 5 * 3)).reshape(2, 5, 5, 3).tolist(),),
}
