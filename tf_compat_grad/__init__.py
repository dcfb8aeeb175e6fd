"""TensorFlow's `@tf.custom_gradient` for PyTorch."""

from ._decorator import CustomGradient as CustomGradient
from ._decorator import custom_gradient as custom_gradient
from ._errors import CustomGradientError as CustomGradientError
from ._errors import CustomGradientNotImplementedError as CustomGradientNotImplementedError
from ._errors import CustomGradientTypeError as CustomGradientTypeError
from ._errors import CustomGradientValueError as CustomGradientValueError
from ._recompute import grad_pass_through as grad_pass_through
from ._recompute import recompute_grad as recompute_grad

__version__ = "0.1.0"

__all__ = [
    "CustomGradient",
    "CustomGradientError",
    "CustomGradientNotImplementedError",
    "CustomGradientTypeError",
    "CustomGradientValueError",
    "custom_gradient",
    "grad_pass_through",
    "recompute_grad",
]
