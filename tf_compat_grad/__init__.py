"""TensorFlow's `@tf.custom_gradient` for PyTorch."""

import warnings as _warnings

# torch warns "Failed to initialize NumPy" when imported without numpy, which neither it nor
# tf_compat_grad needs: `python -m tf_compat_grad` on a fresh install must not look broken.
with _warnings.catch_warnings():
    _warnings.filterwarnings("ignore", "Failed to initialize NumPy", UserWarning)
    import torch as _torch  # noqa: F401

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
