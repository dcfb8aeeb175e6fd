"""NNCF's TensorFlow helpers for compression: a straight-through threshold (round with an
identity gradient), a factory of identities whose gradient is multiplied by a constant, and a
`tf.function` logit.

Source: openvinotoolkit/nncf, nncf/tensorflow/functions.py (Apache-2.0, Intel).
"""

import tensorflow as tf
from typing import Callable


@tf.function
def logit(x):
    return tf.math.log(x / (1 - x))


@tf.custom_gradient
def st_threshold(input_):
    def grad(upstream):
        return upstream

    return tf.round(input_), grad


def get_id_with_multiplied_grad(grad_multiplier: float) -> Callable[[tf.Tensor], tf.Tensor]:
    @tf.custom_gradient
    def id_with_multiplied_grad(x):
        def grad(upstream):
            if grad_multiplier is None:
                return upstream
            return grad_multiplier * upstream

        return x, grad

    return id_with_multiplied_grad


def binary_mask(mask):
    return st_threshold(tf.sigmoid(logit(mask)))


def half_gradient(x):
    return get_id_with_multiplied_grad(0.5)(x)


EXAMPLES = {
    "logit": ([0.1, 0.5, 0.8],),
    "st_threshold": ([-0.6, 0.2, 0.5, 1.4],),
    "binary_mask": ([0.1, 0.45, 0.55, 0.9],),
    "half_gradient": ([1.0, -2.0, 3.0],),
}
