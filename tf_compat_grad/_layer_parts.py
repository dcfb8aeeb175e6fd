"""Keras's initialisers and activations by name, for `layers` (re-exported there)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ._tf_nn import gelu, selu

Initializer = Callable[[tuple[int, ...], torch.dtype], torch.Tensor]


def as_dtype(dtype: Any) -> torch.dtype:
    """A torch dtype from Keras's spelling: None (torch's default dtype), a name or a dtype."""
    if dtype is None:
        return torch.get_default_dtype()
    if isinstance(dtype, torch.dtype):
        return dtype
    found = getattr(torch, str(dtype), None)
    if not isinstance(found, torch.dtype):
        raise TypeError(
            f"tf_compat_grad.layers: dtype {dtype!r} is not a torch dtype name; pass one such as "
            "'float32' or torch.float64 (mixed-precision policies are not translated)"
        )
    return found


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras's `compute_fans`: a kernel `(..., in, out)`, its leading dimensions the receptive
    field (torch counts `(out, in, ...)`)."""
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


class Constant:
    """`tf.keras.initializers.Constant(value)`, `tf.constant_initializer(value)`."""

    def __init__(self, value: Any = 0.0) -> None:
        self.value = value

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> torch.Tensor:
        value = torch.as_tensor(self.value, dtype=as_dtype(dtype))
        shape = tuple(shape)
        return value.expand(shape).clone() if value.dim() == 0 else value.reshape(shape).clone()


class Zeros(Constant):
    def __init__(self) -> None:
        super().__init__(0.0)


class Ones(Constant):
    def __init__(self) -> None:
        super().__init__(1.0)


class RandomNormal:
    """Keras's `RandomNormal` initialiser: normal draws of mean `mean` and standard deviation
    `stddev`, from torch's generator (`seed` is accepted and not used: TF's and torch's
    generators draw different numbers anyway; seed torch with `torch.manual_seed`)."""

    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: int | None = None) -> None:
        self.mean, self.stddev = mean, stddev

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=as_dtype(dtype)).normal_(self.mean, self.stddev)


class RandomUniform:
    """Keras's `RandomUniform` initialiser: uniform draws in [`minval`, `maxval`), from torch's
    generator (`seed` is accepted and not used, as in `RandomNormal`)."""

    def __init__(
        self, minval: float = -0.05, maxval: float = 0.05, seed: int | None = None
    ) -> None:
        self.minval, self.maxval = minval, maxval

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=as_dtype(dtype)).uniform_(self.minval, self.maxval)


class TruncatedNormal(RandomNormal):
    """Normal numbers more than two standard deviations from the mean drawn again."""

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> torch.Tensor:
        low, high = self.mean - 2 * self.stddev, self.mean + 2 * self.stddev
        tensor = torch.empty(tuple(shape), dtype=as_dtype(dtype))
        return torch.nn.init.trunc_normal_(tensor, self.mean, self.stddev, low, high)


class _VarianceScaling:
    """Keras's `VarianceScaling`: variance `scale / fan` (fan_in, fan_out or their mean)."""

    scale, mode, distribution = 1.0, "fan_in", "truncated_normal"

    def __init__(self, seed: int | None = None) -> None:
        pass

    def __call__(self, shape: Sequence[int], dtype: Any = None) -> torch.Tensor:
        fan_in, fan_out = _fans(tuple(shape))
        fan = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
        variance = self.scale / max(1.0, fan[self.mode])
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return RandomUniform(-limit, limit)(shape, dtype)
        # the standard deviation of a unit normal truncated at two standard deviations
        return TruncatedNormal(0.0, math.sqrt(variance) / 0.87962566103423978)(shape, dtype)


class GlorotUniform(_VarianceScaling):
    mode, distribution = "fan_avg", "uniform"


class GlorotNormal(_VarianceScaling):
    mode = "fan_avg"


class HeNormal(_VarianceScaling):
    scale = 2.0


class HeUniform(_VarianceScaling):
    scale, distribution = 2.0, "uniform"


class LecunNormal(_VarianceScaling):
    pass


class LecunUniform(_VarianceScaling):
    distribution = "uniform"


_INITIALIZERS: dict[str, Callable[[], Initializer]] = {
    "zeros": Zeros,
    "ones": Ones,
    "random_normal": RandomNormal,
    "random_uniform": RandomUniform,
    "truncated_normal": TruncatedNormal,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_normal": HeNormal,
    "he_uniform": HeUniform,
    "lecun_normal": LecunNormal,
    "lecun_uniform": LecunUniform,
}


def get_initializer(spec: str | Initializer | None) -> Initializer:
    """A Keras initialiser given by name (`"glorot_uniform"`, Keras's default, for None) or
    a callable `(shape, dtype) -> tensor`."""
    if spec is None:
        return GlorotUniform()
    if callable(spec):
        return spec
    name = "".join("_" + c.lower() if c.isupper() else c for c in spec).lstrip("_")
    if name not in _INITIALIZERS:
        raise ValueError(
            f"tf_compat_grad.layers: unknown initializer {spec!r}; known: "
            f"{', '.join(sorted(_INITIALIZERS))}, or a callable (shape, dtype) -> tensor"
        )
    return _INITIALIZERS[name]()


def leaky_relu(x: torch.Tensor, negative_slope: float) -> torch.Tensor:
    """`tf.nn.leaky_relu`, as Keras calls it: TF keeps the slope as a float32 attribute, so it
    is `negative_slope` rounded to float32 (`0.1` is 0.10000000149...) for float64 `x` too."""
    return F.leaky_relu(x, torch.tensor(negative_slope, dtype=torch.float32).item())


def relu(
    x: torch.Tensor,
    negative_slope: float = 0.0,
    max_value: float | None = None,
    threshold: float = 0.0,
    alpha: float | None = None,
) -> torch.Tensor:
    """Keras's `relu` (`tf.keras.activations.relu`, the `ReLU` layer): `x` above `threshold`
    (else 0), capped at `max_value`, plus `negative_slope * (x - threshold)` below `threshold`;
    Keras's own ops, so TF's gradients at the kinks (0 at `threshold`, 1 at `max_value`).
    `alpha=` is Keras 2's name for `negative_slope`.

    >>> relu(torch.tensor([0.5, 2.0, 7.0]), max_value=6.0, threshold=1.0)
    tensor([0., 2., 6.])
    """
    if alpha is not None:
        negative_slope = alpha
    if negative_slope != 0.0:
        if max_value is None and threshold == 0:
            return leaky_relu(x, negative_slope)
        negative_part = torch.relu(threshold - x)
    clip = max_value is not None
    if threshold != 0:
        y = x * (x > threshold).to(x.dtype)
    elif max_value == 6:
        y, clip = F.relu6(x), False
    else:
        y = torch.relu(x)
    if clip:  # tf.clip_by_value: the gradient passes at the bounds
        low, high = torch.zeros_like(y), torch.full_like(y, float(max_value))  # type: ignore[arg-type]
        y = torch.where(y < low, low, torch.where(y > high, high, y))
    return y - negative_slope * negative_part if negative_slope != 0.0 else y


_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "linear": lambda x: x,
    "relu": relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "elu": F.elu,
    "selu": selu,
    "softplus": lambda x: torch.logaddexp(x, torch.zeros_like(x)),
    "softsign": F.softsign,
    "swish": F.silu,
    "silu": F.silu,
    "gelu": gelu,
    "exponential": torch.exp,
    "relu6": F.relu6,
}


def get_activation(
    spec: str | Callable[[torch.Tensor], torch.Tensor] | None,
) -> Callable[[torch.Tensor], torch.Tensor]:
    """A Keras activation given by name, with TF's formulas (None: the identity), or a callable."""
    if spec is None:
        return _ACTIVATIONS["linear"]
    if callable(spec):
        return spec
    if spec not in _ACTIVATIONS:
        raise ValueError(
            f"tf_compat_grad.layers: activation {spec!r} is not translated; known: "
            f"{', '.join(sorted(_ACTIVATIONS))}, or pass a function"
        )
    return _ACTIVATIONS[spec]
