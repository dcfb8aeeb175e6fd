"""EfficientDet's CIoU aspect-ratio term: a custom gradient closed over the ground-truth box
whose gradient function depends on the mode, an eager `grad(dv)` or a graph-mode
`grad(dv, variables)` that differentiates through `tf.gradients`.

Source: google/automl, efficientdet/iou_utils.py (Apache-2.0); the IoU loss functions left out.
"""

import math
from typing import Union

import numpy as np
import tensorflow as tf

FloatType = Union[tf.Tensor, float, np.float32, np.float64]


def _get_v(b1_height: FloatType, b1_width: FloatType, b2_height: FloatType, b2_width: FloatType) -> tf.Tensor:
    """Get the consistency measurement of aspect ratio for ciou."""

    @tf.custom_gradient
    def _get_grad_v(height, width):
        """backpropogate gradient."""
        arctan = tf.atan(tf.math.divide_no_nan(b1_width, b1_height)) - tf.atan(
            tf.math.divide_no_nan(width, height)
        )
        v = 4 * ((arctan / math.pi) ** 2)

        def _grad_v(dv):
            """Grad for eager mode."""
            gdw = dv * 8 * arctan * height / (math.pi**2)
            gdh = -dv * 8 * arctan * width / (math.pi**2)
            return [gdh, gdw]

        def _grad_v_graph(dv, variables):
            """Grad for graph mode."""
            gdw = dv * 8 * arctan * height / (math.pi**2)
            gdh = -dv * 8 * arctan * width / (math.pi**2)
            return [gdh, gdw], tf.gradients(v, variables, grad_ys=dv)

        if tf.compat.v1.executing_eagerly_outside_functions():
            return v, _grad_v
        return v, _grad_v_graph

    return _get_grad_v(b2_height, b2_width)


EXAMPLES = {
    "_get_v": ([2.0, 1.0, 3.0], [1.0, 1.5, 3.0], [1.5, 2.0, 1.0], [1.0, 0.5, 2.0]),
}
