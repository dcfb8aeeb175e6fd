"""TensorFlow Compression's continuous entropy models quantize by straight-through rounding
written as custom gradients on methods of a `tf.Module` subclass (`self` is not differentiated;
the offset gets no gradient).

Source: tensorflow/compression,
tensorflow_compression/python/entropy_models/continuous_base.py (Apache-2.0): the quantization
methods of ContinuousEntropyModelBase, with a constructor reduced to the attributes they use
and the range-coding machinery left out.
"""

import tensorflow as tf


class ContinuousEntropyModelBase(tf.Module):
    """Base class for continuous entropy models."""

    def __init__(self, compression=False, stateless=False):
        super().__init__()
        self._compression = bool(compression)
        self._stateless = bool(stateless)

    @property
    def compression(self):
        """Whether this entropy model is prepared for compression."""
        return self._compression

    @tf.custom_gradient
    def _quantize_no_offset(self, inputs):
        return tf.round(inputs), lambda x: x

    @tf.custom_gradient
    def _quantize_offset(self, inputs, offset):
        return tf.round(inputs - offset) + offset, lambda x: (x, None)

    def _quantize(self, inputs, offset=None):
        if offset is None:
            outputs = self._quantize_no_offset(inputs)
        else:
            outputs = self._quantize_offset(inputs, offset)
        return outputs


model = ContinuousEntropyModelBase()


def quantize(inputs):
    return model._quantize(inputs)


def quantize_with_offset(inputs, offset):
    return model._quantize(inputs, offset)


EXAMPLES = {
    "quantize": ([-1.6, -0.5, 0.4, 0.5, 1.5, 2.7],),
    "quantize_with_offset": ([-1.6, -0.5, 0.4, 0.5, 1.5, 2.7], [0.25]),
}
