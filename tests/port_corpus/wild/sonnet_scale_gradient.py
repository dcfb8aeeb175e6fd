"""Sonnet's `scale_gradient`: an identity whose backward pass multiplies by `scale` (with type
annotations on the function and its gradient).

Source: google-deepmind/sonnet, sonnet/src/scale_gradient.py (Apache-2.0); `types.FloatLike` and
`types.GradFn` replaced by their meaning.
"""

from typing import Callable, Tuple, Union

import tensorflow as tf


@tf.custom_gradient
def scale_gradient(t: tf.Tensor, scale: Union[float, tf.Tensor]) -> Tuple[tf.Tensor, Callable]:
    """Scales gradients for the backwards pass."""

    def grad(dy: tf.Tensor) -> Tuple[tf.Tensor, None]:
        """Scaled gradient."""
        return scale * dy, None

    return t, grad


EXAMPLES = {
    "scale_gradient": ([[0.5, -1.0], [2.0, 0.0]], {"py": 0.1}),
}
