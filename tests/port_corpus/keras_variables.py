"""Layers that make their weights with `tf.Variable` in `build` (one not trainable, updated
with `assign` and read with `.value()`), type annotations with `tf.Tensor`, a straight-through
floor and a modulo on an int32 constant, a module-level non-trainable counter."""

from collections.abc import Callable

import tensorflow as tf

calls = tf.Variable(0.0, trainable=False, dtype=tf.float64)


class Round(tf.keras.layers.Layer):
    def __init__(self):
        super(Round, self).__init__(dtype="float64")  # noqa: UP008 (as real code has it)

    @tf.custom_gradient
    def call(self, inputs: tf.Tensor) -> tuple[tf.Tensor, Callable]:
        def grad(upstream):
            return upstream

        return tf.floor(inputs), grad


class Modulo(tf.keras.layers.Layer):
    def __init__(self, num_bits: int):
        super(Modulo, self).__init__(dtype="float64")  # noqa: UP008
        self.num_bits = tf.constant(num_bits)

    def build(self, input_shape):
        self.gain = tf.Variable(
            initial_value=tf.ones(shape=(input_shape[-1],), dtype=tf.float64),
            trainable=True,
            name="gain",
        )
        self.seen = tf.Variable(0.0, trainable=False, dtype=tf.float64, name="seen")

    @tf.custom_gradient
    def call(self, inputs: tf.Tensor) -> tuple[tf.Tensor, Callable]:
        self.seen.assign_add(1.0)
        calls.assign_add(1.0)
        num_bins = tf.cast(2**self.num_bits, inputs.dtype)
        scaled = inputs * self.gain.value()
        rem = scaled - tf.math.floordiv(scaled, num_bins) * num_bins

        def grad(upstream, variables=None):
            return upstream * self.gain, [tf.reduce_sum(upstream * inputs, axis=0)]

        return rem + self.seen.value() + calls, grad


rounding = Round()
modulo = Modulo(2)


def round_then_modulo(x):
    return modulo(rounding(x) * 1.5)


EXAMPLES = {"round_then_modulo": ([[0.3, 2.7, -1.2], [5.5, -3.1, 0.9]],)}
