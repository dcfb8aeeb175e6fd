"""TensorFlow's `@tf.custom_gradient` for PyTorch."""

from ._decorator import CustomGradient as CustomGradient
from ._decorator import custom_gradient as custom_gradient
from ._errors import CustomGradientError as CustomGradientError
from ._errors import CustomGradientTypeError as CustomGradientTypeError
from ._errors import CustomGradientValueError as CustomGradientValueError

__version__ = "0.1.0"

__all__ = [
    "CustomGradient",
    "CustomGradientError",
    "CustomGradientTypeError",
    "CustomGradientValueError",
    "custom_gradient",
]
