"""A Keras layer computing floor with an identity gradient (the layer reuses Layer's docstrings).

Source: pypi-data/pypi-mirror-345, packages/mttf/mttf-1.1.5-py3-none-any.whl/mt/tf/keras_layers/
floor.py (the mttf package on PyPI). No license file in the indexed copy.
"""

import tensorflow as tf


@tf.custom_gradient
def floor(x):
    def grad(upstream):  # identity
        return upstream

    return tf.math.floor(x), grad


class Floor(tf.keras.layers.Layer):
    """TensorFlow floor but gradient is identity."""

    def call(self, x):
        return floor(x)

    call.__doc__ = tf.keras.layers.Layer.call.__doc__

    def compute_output_shape(self, input_shape):
        return input_shape

    compute_output_shape.__doc__ = tf.keras.layers.Layer.compute_output_shape.__doc__


EXAMPLES = {"floor": ([-1.5, -0.2, 0.0, 0.7, 2.5],), "Floor": {"call": ([[-1.5, 0.7], [2.5, -0.2]],)}}
