"""Keras's initialisers, activations, regularizers and constraints by name, for `layers`
(re-exported there), and what a layer does before each call (`build_and_cast`)."""

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
    return F.leaky_relu(x, _float32(negative_slope))


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


class L1L2:
    """Keras's `L1L2` regularizer: `l1 * sum(|w|) + l2 * sum(w ** 2)` (`L1`, `L2`: one term,
    0.01 by default), a term of the layer's `losses`; the factors rounded to float32, as Keras
    converts them."""

    def __init__(self, l1: float = 0.0, l2: float = 0.0) -> None:
        self.l1, self.l2 = l1, l2

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        term = torch.zeros((), dtype=x.dtype, device=x.device)
        if self.l1:
            term = term + _float32(self.l1) * torch.sum(torch.abs(x))
        if self.l2:
            term = term + _float32(self.l2) * torch.sum(torch.square(x))
        return term


def _float32(value: float) -> float:
    return torch.tensor(value, dtype=torch.float32).item()


class L1(L1L2):
    """`tf.keras.regularizers.L1` (also `l1`): `l1 * sum(|w|)`."""

    def __init__(self, l1: float = 0.01) -> None:
        super().__init__(l1=l1)


class L2(L1L2):
    """`tf.keras.regularizers.L2` (also `l2`): `l2 * sum(w**2)`."""

    def __init__(self, l2: float = 0.01) -> None:
        super().__init__(l2=l2)


_REGULARIZERS: dict[str, Callable[[], L1L2]] = {"l1": L1, "l2": L2, "l1_l2": L1L2}


def get_regularizer(spec: Any) -> Callable[[torch.Tensor], Any] | None:
    """A Keras regularizer by name (`"l1"`, `"l2"`, `"l1_l2"`, any case, with Keras's
    defaults), a callable, or None."""
    if spec is None or callable(spec):
        given: Callable[[torch.Tensor], Any] | None = spec
        return given
    if str(spec).lower() not in _REGULARIZERS:
        raise ValueError(
            f"tf_compat_grad.layers: unknown regularizer {spec!r}; known: "
            f"{', '.join(_REGULARIZERS)}, or pass a callable"
        )
    return _REGULARIZERS[str(spec).lower()]()


def get_constraint(spec: Any) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """A Keras constraint: a callable, or None (Keras's named constraints are not translated)."""
    if spec is None or callable(spec):
        given: Callable[[torch.Tensor], torch.Tensor] | None = spec
        return given
    raise ValueError(
        f"tf_compat_grad.layers: constraint {spec!r} is not translated; pass a callable"
    )


class InputSpec:
    """`tf.keras.layers.InputSpec(...)`: kept as the layer's description; not checked."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


def serialize(obj: Any) -> Any:
    """Keras's `serialize` of an activation, initializer or regularizer, for `get_config`: a
    function's name, an object's class name and attributes, None for None."""
    if obj is None or isinstance(obj, str):
        return obj
    if not hasattr(obj, "__dict__") or (callable(obj) and hasattr(obj, "__name__")):
        return getattr(obj, "__name__", repr(obj))
    return {"class_name": type(obj).__name__, "config": dict(vars(obj))}


def _shapes(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    if isinstance(value, (list, tuple)):
        return type(value)(_shapes(v) for v in value)
    return value


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype != dtype else value
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    if isinstance(value, dict):
        return {k: _cast(v, dtype) for k, v in value.items()}
    return value


def build_and_cast(
    layer: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Keras's `__call__` before `call`: floating inputs cast to the layer's dtype, and `build`
    with the first input's shape on the first call."""
    args, kwargs = _cast(args, layer.dtype), _cast(kwargs, layer.dtype)
    if not layer.built:
        first = args[0] if args else next(iter(kwargs.values()), None)
        layer.build(_shapes(first))
        layer.built = True
    return args, kwargs
