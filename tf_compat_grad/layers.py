"""Keras's layer protocol on `nn.Module`, for the code `python -m tf_compat_grad port` writes
from a `tf.keras.layers.Layer` or `tf.Module` subclass.

`Layer` builds on the first call as Keras does (`build(input_shape)` then `call`, here `forward`),
`add_weight` creates Parameters (buffers for `trainable=False`) with Keras's initialisers (a
`regularizer=`'s penalty is in `layer.losses`, as in Keras), and floating inputs are cast to the
layer's dtype as Keras casts them. `Dense`, `Conv2D` (channels-last by default, as in Keras),
`BatchNormalization`, `Dropout`, `Flatten` and the activation layers (`Activation`, `ReLU`,
`LeakyReLU`, `Softmax`) keep Keras's weight layouts, defaults and formulas.

>>> import torch
>>> from tf_compat_grad import custom_gradient, layers
>>> class Scale(layers.Layer):
...     def build(self, input_shape):
...         self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")
...
...     @custom_gradient
...     def forward(self, x):
...         def grad(dy, variables=None):
...             return 2 * dy * self.w, [torch.sum(dy * x, dim=0)]
...
...         return x * self.w, grad
>>> layer = Scale(dtype=torch.float64)
>>> x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
>>> layer(x).sum().backward()
>>> x.grad[0].tolist(), layer.w.grad.tolist()
([2.0, 2.0, 2.0], [2.0, 2.0, 2.0])

Differences from Keras: the global float type is torch's default dtype (float32 unless
changed); random initialisers draw from torch's generator (the same distributions, other
numbers); `training=None` means inference, as in a Keras call outside `fit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ._layer_parts import (
    L1,
    L1L2,
    L2,
    Constant,
    GlorotNormal,
    GlorotUniform,
    HeNormal,
    HeUniform,
    Initializer,
    InputSpec,
    LecunNormal,
    LecunUniform,
    Ones,
    RandomNormal,
    RandomUniform,
    TruncatedNormal,
    Zeros,
    as_dtype,
    build_and_cast,
    get_activation,
    get_constraint,
    get_initializer,
    get_regularizer,
    leaky_relu,
    relu,
    serialize,
)
from ._tf_nn import batch_normalization, moments, same_padding

__all__ = [
    "L1",
    "L1L2",
    "L2",
    "Activation",
    "BatchNormalization",
    "Constant",
    "Conv2D",
    "Dense",
    "Dropout",
    "Flatten",
    "GlorotNormal",
    "GlorotUniform",
    "HeNormal",
    "HeUniform",
    "InputSpec",
    "Lambda",
    "Layer",
    "LeakyReLU",
    "LecunNormal",
    "LecunUniform",
    "Module",
    "Ones",
    "RandomNormal",
    "RandomUniform",
    "ReLU",
    "Softmax",
    "TruncatedNormal",
    "Zeros",
    "get_activation",
    "get_constraint",
    "get_initializer",
    "get_regularizer",
    "relu",
    "serialize",
]

# The keyword arguments Keras's `Layer.__init__` accepts; those without effect here are ignored.
_LAYER_KWARGS = {
    "input_dim",
    "input_shape",
    "batch_input_shape",
    "batch_size",
    "activity_regularizer",
    "autocast",
    "dynamic",
}


class Module(nn.Module):
    """`tf.Module`: an `nn.Module` that takes TF's `name=` and lists its variables as TF does."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        self.name = name or type(self).__name__.lower()

    @property
    def trainable_variables(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    @property
    def non_trainable_variables(self) -> list[torch.Tensor]:
        return list(self.buffers())

    @property
    def variables(self) -> list[torch.Tensor]:
        return [*self.trainable_variables, *self.non_trainable_variables]

    trainable_weights = trainable_variables
    non_trainable_weights = non_trainable_variables
    weights = variables


class Layer(Module):
    """`tf.keras.layers.Layer`: `build` on the first call, `add_weight`, Keras's input casting.

    Args:
        trainable: False makes every weight of the layer a buffer.
        name: the layer's name.
        dtype: its weights' dtype (a torch dtype or its name), to which floating inputs are cast;
            torch's default dtype if None.
        **kwargs: Keras's other `Layer` arguments (`input_shape=`, ...), without effect here.
    """

    def __init__(
        self, trainable: bool = True, name: str | None = None, dtype: Any = None, **kwargs: Any
    ) -> None:
        unknown = sorted(set(kwargs) - _LAYER_KWARGS)
        if unknown:
            raise TypeError(f"tf_compat_grad.layers: unexpected keyword argument {unknown[0]!r}")
        super().__init__(name)
        self.trainable = trainable
        self.dtype = as_dtype(dtype)
        self.built = False
        self._weight_count = 0
        self._added_losses: list[torch.Tensor] = []
        self._regularized: list[tuple[torch.Tensor, Callable[[torch.Tensor], Any]]] = []
        self.constraints: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {}
        self.register_forward_pre_hook(build_and_cast, with_kwargs=True)

    def build(self, input_shape: Any) -> None:
        """Create the weights, given the first input's shape (a tuple, batch first)."""

    def add_weight(
        self,
        shape: Any = None,
        initializer: Any = None,
        dtype: Any = None,
        trainable: bool = True,
        name: str | None = None,
        **kwargs: Any,
    ) -> torch.Tensor:
        """A Parameter (a buffer if not `trainable`) of `shape` registered on the layer under
        `name`, initialised as Keras initialises it (`glorot_uniform` by default). Positional
        arguments in Keras 3's order (`shape, initializer, dtype`), or Keras 2's (`name, shape,
        dtype, initializer`) when the first is a string. A `regularizer`'s term is in
        `self.losses`, a `constraint` in `self.constraints` (Keras applies it after each
        optimizer step: do the same in the training loop)."""
        if isinstance(shape, str):  # Keras 2: add_weight(name, shape, dtype, initializer)
            name, shape, dtype, initializer = (
                shape,
                initializer,
                dtype,
                kwargs.pop("initializer", None),
            )
        regularizer = get_regularizer(kwargs.pop("regularizer", None))
        constraint = kwargs.pop("constraint", None)
        kwargs.pop("aggregation", None), kwargs.pop("synchronization", None)
        kwargs.pop("use_resource", None), kwargs.pop("autocast", None)
        if kwargs:
            raise TypeError(
                f"tf_compat_grad.layers: add_weight() got an unexpected argument {sorted(kwargs)[0]!r}"
            )
        self._weight_count += 1
        key = name or f"weight_{self._weight_count}"
        while hasattr(self, key) and key not in self._parameters and key not in self._buffers:
            key += "_"
        value = get_initializer(initializer)(
            tuple(shape or ()), as_dtype(dtype) if dtype is not None else self.dtype
        )
        weight = nn.Parameter(value) if trainable and self.trainable else value
        if isinstance(weight, nn.Parameter):
            self.register_parameter(key, weight)
            if regularizer is not None:  # Keras regularizes its trainable weights only
                self._regularized.append((weight, regularizer))
        else:
            self.register_buffer(key, value)
        if constraint is not None:
            self.constraints[key] = constraint
        return weight

    def add_loss(self, loss: torch.Tensor) -> None:
        """Keep a loss term in `self.losses` (Keras adds them to the training loss; add them
        to yours)."""
        self._added_losses.append(loss)

    @property
    def losses(self) -> list[Any]:
        """The `add_loss` terms of the layer and its sublayers, then the penalties of their
        regularized weights, computed from the weights' current values, as in Keras."""
        layers = [m for m in self.modules() if isinstance(m, Layer)]
        found: list[Any] = [loss for layer in layers for loss in layer._added_losses]
        return found + [fn(w) for layer in layers for w, fn in layer._regularized]

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "trainable": self.trainable, "dtype": str(self.dtype)[6:]}

    def compute_output_shape(self, input_shape: Any) -> Any:
        raise NotImplementedError(
            f"tf_compat_grad.layers: {type(self).__name__} defines no compute_output_shape"
        )


class Dense(Layer):
    """`tf.keras.layers.Dense`: `activation(x @ kernel + bias)`, the kernel `(in, units)`."""

    def __init__(
        self,
        units: int,
        activation: str | Callable[[torch.Tensor], torch.Tensor] | None = None,
        use_bias: bool = True,
        kernel_initializer: str | Initializer = "glorot_uniform",
        bias_initializer: str | Initializer = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def build(self, input_shape: Any) -> None:
        self.kernel = self.add_weight(
            name="kernel", shape=(input_shape[-1], self.units), initializer=self.kernel_initializer
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.units,), initializer=self.bias_initializer
            )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        y = torch.matmul(inputs, self.kernel)
        return self.activation(y + self.bias if self.use_bias else y)


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (value[0], value[1])


class Conv2D(Layer):
    """`tf.keras.layers.Conv2D`: the kernel `(height, width, in, filters)` as Keras keeps it,
    `padding="same"` padded as TF pads (the extra row or column at the end), channels-last
    inputs by default (`data_format="channels_last"`, NHWC), as in Keras."""

    def __init__(
        self,
        filters: int,
        kernel_size: int | Sequence[int],
        strides: int | Sequence[int] = (1, 1),
        padding: str = "valid",
        data_format: str | None = None,
        dilation_rate: int | Sequence[int] = (1, 1),
        groups: int = 1,
        activation: str | Callable[[torch.Tensor], torch.Tensor] | None = None,
        use_bias: bool = True,
        kernel_initializer: str | Initializer = "glorot_uniform",
        bias_initializer: str | Initializer = "zeros",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if padding.lower() not in ("valid", "same"):
            raise ValueError(
                f"tf_compat_grad.layers.Conv2D: padding {padding!r} is not 'valid' or 'same'"
            )
        self.filters, self.kernel_size = filters, _pair(kernel_size)
        self.strides, self.dilation_rate = _pair(strides), _pair(dilation_rate)
        self.padding, self.groups = padding.lower(), groups
        self.data_format = data_format or "channels_last"
        self.activation = get_activation(activation)
        self.use_bias = use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def build(self, input_shape: Any) -> None:
        channels = input_shape[-1 if self.data_format == "channels_last" else 1]
        shape = (*self.kernel_size, channels // self.groups, self.filters)
        self.kernel = self.add_weight(
            name="kernel", shape=shape, initializer=self.kernel_initializer
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.filters,), initializer=self.bias_initializer
            )

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = inputs.permute(0, 3, 1, 2) if self.data_format == "channels_last" else inputs
        if self.padding == "same":
            x = F.pad(
                x, same_padding(x.shape[2:], self.kernel_size, self.strides, self.dilation_rate)
            )
        y = F.conv2d(
            x,
            self.kernel.permute(3, 2, 0, 1),
            self.bias if self.use_bias else None,
            stride=self.strides,
            dilation=self.dilation_rate,
            groups=self.groups,
        )
        y = y.permute(0, 2, 3, 1) if self.data_format == "channels_last" else y
        return self.activation(y)


class BatchNormalization(Layer):
    """`tf.keras.layers.BatchNormalization` over `axis` (the last: channels-last): in training
    the batch's mean and (biased) variance, and the moving averages updated with `momentum`;
    otherwise (`training=None` too) the moving averages."""

    def __init__(
        self,
        axis: int = -1,
        momentum: float = 0.99,
        epsilon: float = 1e-3,
        center: bool = True,
        scale: bool = True,
        beta_initializer: str | Initializer = "zeros",
        gamma_initializer: str | Initializer = "ones",
        moving_mean_initializer: str | Initializer = "zeros",
        moving_variance_initializer: str | Initializer = "ones",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.axis, self.momentum, self.epsilon = axis, momentum, epsilon
        self.center, self.scale = center, scale
        self.initializers = (
            beta_initializer,
            gamma_initializer,
            moving_mean_initializer,
            moving_variance_initializer,
        )

    def build(self, input_shape: Any) -> None:
        shape = (input_shape[self.axis],)
        beta, gamma, mean, variance = self.initializers
        if self.scale:
            self.gamma = self.add_weight(name="gamma", shape=shape, initializer=gamma)
        if self.center:
            self.beta = self.add_weight(name="beta", shape=shape, initializer=beta)
        self.moving_mean = self.add_weight(
            name="moving_mean", shape=shape, initializer=mean, trainable=False
        )
        self.moving_variance = self.add_weight(
            name="moving_variance", shape=shape, initializer=variance, trainable=False
        )

    def forward(self, inputs: torch.Tensor, training: bool | None = None) -> torch.Tensor:
        axis = self.axis % inputs.dim()
        reduced = [d for d in range(inputs.dim()) if d != axis]
        shape = [inputs.shape[d] if d == axis else 1 for d in range(inputs.dim())]
        if training and self.trainable:
            mean, variance = moments(inputs, reduced, keepdims=True)
            with torch.no_grad():
                self.moving_mean.mul_(self.momentum).add_((1 - self.momentum) * mean.flatten())
                self.moving_variance.mul_(self.momentum).add_(
                    (1 - self.momentum) * variance.flatten()
                )
        else:
            mean = self.moving_mean.reshape(shape)
            variance = self.moving_variance.reshape(shape)
        beta = self.beta.reshape(shape) if self.center else None
        gamma = self.gamma.reshape(shape) if self.scale else None
        return batch_normalization(inputs, mean, variance, beta, gamma, self.epsilon)


class Activation(Layer):
    """`tf.keras.layers.Activation(name)`, and `ReLU`, `Softmax`, ... as `Activation`."""

    def __init__(
        self, activation: str | Callable[[torch.Tensor], torch.Tensor] | None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.activation = get_activation(activation)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return self.activation(inputs)


class ReLU(Layer):
    """`tf.keras.layers.ReLU(max_value, negative_slope, threshold)`: Keras's formula (`relu`)."""

    def __init__(
        self,
        max_value: float | None = None,
        negative_slope: float = 0.0,
        threshold: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return relu(inputs, self.negative_slope, self.max_value, self.threshold)


class LeakyReLU(Layer):
    """`tf.keras.layers.LeakyReLU(negative_slope=0.3)` (Keras 2: `alpha=`), the slope rounded
    to float32 as TF keeps it."""

    def __init__(self, negative_slope: float = 0.3, alpha: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.negative_slope = negative_slope if alpha is None else alpha

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return leaky_relu(inputs, self.negative_slope)


class Softmax(Layer):
    """`tf.keras.layers.Softmax(axis=-1)`."""

    def __init__(self, axis: int = -1, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.axis = axis

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return torch.softmax(inputs, dim=self.axis)


class Dropout(Layer):
    """`tf.keras.layers.Dropout(rate)`: kept elements scaled by `1 / (1 - rate)` in training
    (torch's random numbers), the identity otherwise (`training=None` too)."""

    def __init__(self, rate: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rate = rate

    def forward(self, inputs: torch.Tensor, training: bool | None = None) -> torch.Tensor:
        return F.dropout(inputs, self.rate, training=bool(training))


class Lambda(Layer):
    """`tf.keras.layers.Lambda(function)`: calls the function."""

    def __init__(self, function: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.function = function

    def forward(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        return self.function(inputs, *args, **kwargs)


class Flatten(Layer):
    """`tf.keras.layers.Flatten()` (channels-last): every dimension but the batch's in one."""

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return inputs.reshape(inputs.shape[0], -1)
