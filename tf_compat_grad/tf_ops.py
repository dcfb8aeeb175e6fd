"""TensorFlow ops with TensorFlow's semantics, written in torch: what `python -m tf_compat_grad
port` calls where one short torch expression would not say the same thing.

Each function takes TensorFlow's arguments (its names and defaults), computes TF's formula (so
values, gradients and second derivatives are TF's, checked against numbers recorded from
TensorFlow 2.21 in tests/test_port.py), and returns a torch tensor. Layouts are TF's: images are
NHWC and filters `(height, width, in, out)` unless `data_format="NCHW"`.

>>> import torch
>>> from tf_compat_grad import tf_ops
>>> tf_ops.clip_by_norm(torch.tensor([3.0, 4.0]), 1.0)
tensor([0.6000, 0.8000])
>>> tf_ops.convert_to_tensor([1, 2]).dtype, tf_ops.convert_to_tensor(0.5).dtype
(torch.int32, torch.float32)
"""

from ._layer_parts import as_dtype as as_dtype
from ._tf_control import cond as cond
from ._tf_control import control_dependencies as control_dependencies
from ._tf_control import device as device
from ._tf_control import gradients as gradients
from ._tf_control import map_structure as map_structure
from ._tf_control import name_scope as name_scope
from ._tf_control import nest_flatten as nest_flatten
from ._tf_control import pack_sequence_as as pack_sequence_as
from ._tf_control import tape_gradient as tape_gradient
from ._tf_control import while_loop as while_loop
from ._tf_debugging import Assert as Assert
from ._tf_debugging import InvalidArgumentError as InvalidArgumentError
from ._tf_debugging import assert_all_finite as assert_all_finite
from ._tf_debugging import assert_equal as assert_equal
from ._tf_debugging import assert_greater as assert_greater
from ._tf_debugging import assert_greater_equal as assert_greater_equal
from ._tf_debugging import assert_less as assert_less
from ._tf_debugging import assert_less_equal as assert_less_equal
from ._tf_debugging import assert_negative as assert_negative
from ._tf_debugging import assert_non_negative as assert_non_negative
from ._tf_debugging import assert_non_positive as assert_non_positive
from ._tf_debugging import assert_none_equal as assert_none_equal
from ._tf_debugging import assert_positive as assert_positive
from ._tf_debugging import check_numerics as check_numerics
from ._tf_debugging import ensure_shape as ensure_shape
from ._tf_linalg import TopK as TopK
from ._tf_linalg import band_part as band_part
from ._tf_linalg import clip_by_global_norm as clip_by_global_norm
from ._tf_linalg import cumprod as cumprod
from ._tf_linalg import cumsum as cumsum
from ._tf_linalg import gather as gather
from ._tf_linalg import gather_nd as gather_nd
from ._tf_linalg import scatter_nd as scatter_nd
from ._tf_linalg import svd as svd
from ._tf_linalg import tensor_scatter_nd_add as tensor_scatter_nd_add
from ._tf_linalg import tensor_scatter_nd_update as tensor_scatter_nd_update
from ._tf_linalg import top_k as top_k
from ._tf_math import bincount as bincount
from ._tf_math import clip_by_norm as clip_by_norm
from ._tf_math import clip_by_value as clip_by_value
from ._tf_math import convert_to_tensor as convert_to_tensor
from ._tf_math import div_v1 as div_v1
from ._tf_math import divide as divide
from ._tf_math import divide_no_nan as divide_no_nan
from ._tf_math import keras_clip as keras_clip
from ._tf_math import l2_normalize as l2_normalize
from ._tf_math import maximum as maximum
from ._tf_math import minimum as minimum
from ._tf_math import reduce_all as reduce_all
from ._tf_math import reduce_any as reduce_any
from ._tf_math import reduce_logsumexp as reduce_logsumexp
from ._tf_math import reduce_max as reduce_max
from ._tf_math import reduce_mean as reduce_mean
from ._tf_math import reduce_min as reduce_min
from ._tf_math import reduce_prod as reduce_prod
from ._tf_math import reduce_std as reduce_std
from ._tf_math import reduce_sum as reduce_sum
from ._tf_math import reduce_variance as reduce_variance
from ._tf_math import where_v1 as where_v1
from ._tf_nn import avg_pool2d as avg_pool2d
from ._tf_nn import batch_normalization as batch_normalization
from ._tf_nn import conv2d as conv2d
from ._tf_nn import gelu as gelu
from ._tf_nn import log_softmax as log_softmax
from ._tf_nn import max_pool2d as max_pool2d
from ._tf_nn import moments as moments
from ._tf_nn import same_padding as same_padding
from ._tf_nn import selu as selu
from ._tf_nn import sigmoid_cross_entropy_with_logits as sigmoid_cross_entropy_with_logits
from ._tf_nn import softmax as softmax
from ._tf_nn import softmax_cross_entropy_with_logits as softmax_cross_entropy_with_logits
from ._tf_nn import (
    sparse_softmax_cross_entropy_with_logits as sparse_softmax_cross_entropy_with_logits,
)
from ._tf_random import normal as random_normal
from ._tf_random import truncated_normal as truncated_normal
from ._tf_random import uniform as random_uniform

__all__ = [
    "Assert",
    "InvalidArgumentError",
    "TopK",
    "as_dtype",
    "assert_all_finite",
    "assert_equal",
    "assert_greater",
    "assert_greater_equal",
    "assert_less",
    "assert_less_equal",
    "assert_negative",
    "assert_non_negative",
    "assert_non_positive",
    "assert_none_equal",
    "assert_positive",
    "avg_pool2d",
    "band_part",
    "batch_normalization",
    "bincount",
    "check_numerics",
    "clip_by_global_norm",
    "clip_by_norm",
    "clip_by_value",
    "cond",
    "control_dependencies",
    "conv2d",
    "convert_to_tensor",
    "cumprod",
    "cumsum",
    "device",
    "div_v1",
    "divide",
    "divide_no_nan",
    "ensure_shape",
    "gather",
    "gather_nd",
    "gelu",
    "gradients",
    "keras_clip",
    "l2_normalize",
    "log_softmax",
    "map_structure",
    "max_pool2d",
    "maximum",
    "minimum",
    "moments",
    "name_scope",
    "nest_flatten",
    "pack_sequence_as",
    "random_normal",
    "random_uniform",
    "reduce_all",
    "reduce_any",
    "reduce_logsumexp",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_prod",
    "reduce_std",
    "reduce_sum",
    "reduce_variance",
    "same_padding",
    "scatter_nd",
    "selu",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "sparse_softmax_cross_entropy_with_logits",
    "svd",
    "tape_gradient",
    "tensor_scatter_nd_add",
    "tensor_scatter_nd_update",
    "top_k",
    "truncated_normal",
    "where_v1",
    "while_loop",
]
