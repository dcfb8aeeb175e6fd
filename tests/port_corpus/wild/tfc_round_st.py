"""TensorFlow Compression's straight-through rounding, with and without a quantization offset
(the offset gets no gradient).

Source: tensorflow/compression, tensorflow_compression/python/ops/round_ops.py (Apache-2.0).
"""

import tensorflow as tf


@tf.custom_gradient
def _round_st_no_offset(inputs):
    return tf.round(inputs), lambda x: x


@tf.custom_gradient
def _round_st_offset(inputs, offset):
    return tf.round(inputs - offset) + offset, lambda x: (x, None)


def round_st(inputs, offset=None):
    """Straight-through round with optional quantization offset."""
    if offset is None:
        return _round_st_no_offset(inputs)
    else:
        return _round_st_offset(inputs, offset)


def round_st_with_offset(inputs, offset):
    return round_st(inputs, offset)


EXAMPLES = {
    "round_st": ([-1.6, -0.5, 0.4, 0.5, 1.5, 2.7],),
    "round_st_with_offset": ([-1.6, -0.5, 0.4, 0.5, 1.5, 2.7], [0.25]),
}
