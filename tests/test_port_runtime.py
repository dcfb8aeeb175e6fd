"""What ported code calls, beyond the corpus's numbers (tests/test_port.py checks those against
TensorFlow): `tf_compat_grad.layers` (Keras's layer protocol) and `tf_compat_grad.tf_ops`
(TF's dtype rules and refusals)."""

from __future__ import annotations

import math
import re

import pytest
import torch

from tf_compat_grad import layers, tf_ops


class Scale(layers.Layer):
    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1],), None, "ones")  # Keras 2's order
        self.count = self.add_weight(shape=(), initializer="zeros", trainable=False)

    def forward(self, x):
        return x * self.w


def test_build_runs_once_on_the_first_call_with_its_shape() -> None:
    layer = Scale(dtype="float64")
    assert not layer.built and list(layer.parameters()) == []
    y = layer(torch.ones(2, 3))  # a float32 input, cast to the layer's float64
    assert y.dtype == torch.float64 and layer.built
    assert [n for n, _ in layer.named_parameters()] == ["w"]
    assert [n for n, _ in layer.named_buffers()] == ["weight_2"]
    layer(torch.ones(2, 3))
    assert len(list(layer.parameters())) == 1
    assert layer.trainable_weights == [layer.w] and layer.non_trainable_weights == [layer.count]


def test_a_layer_that_is_not_trainable_makes_buffers() -> None:
    layer = Scale(trainable=False)
    layer(torch.ones(1, 2))
    assert list(layer.parameters()) == [] and len(list(layer.buffers())) == 2


def test_regularizers_are_losses_and_constraints_are_kept() -> None:
    layer = layers.Layer(dtype="float64")
    w = layer.add_weight(shape=(2,), initializer="ones", regularizer="l2", name="w")
    layer.add_weight(
        shape=(2,), initializer="ones", regularizer=layers.L1(0.5), constraint=torch.relu, name="v"
    )
    layer.add_loss(torch.tensor(3.0))
    terms = [t.item() for t in layer.losses]
    assert terms == [3.0, pytest.approx(0.02), pytest.approx(1.0)]
    with torch.no_grad():
        w.mul_(2)  # computed when read, as Keras's
    assert layer.losses[1].item() == pytest.approx(0.08)
    assert layer.constraints == {"v": torch.relu}
    with pytest.raises(ValueError, match="constraint 'non_neg' is not translated"):
        layers.get_constraint("non_neg")


def test_what_is_not_translated_raises_with_the_fix() -> None:
    layer = layers.Layer()
    with pytest.raises(ValueError, match="unknown initializer 'orthogonal'"):
        layer.add_weight(shape=(2,), initializer="orthogonal")
    with pytest.raises(TypeError, match="unexpected keyword argument 'units'"):
        layers.Layer(units=3)
    with pytest.raises(ValueError, match="activation 'hard_silu' is not translated"):
        layers.Dense(2, activation="hard_silu")


def test_glorot_uniform_uses_keras_fans_of_a_channels_last_kernel() -> None:
    torch.manual_seed(0)
    kernel = layers.GlorotUniform()((3, 3, 4, 8), torch.float64)  # fans 36 and 72
    limit = math.sqrt(6 / (36 + 72))
    assert kernel.abs().max() <= limit and kernel.abs().max() > 0.9 * limit


def test_batch_normalization_trains_and_infers_as_keras() -> None:
    norm = layers.BatchNormalization(momentum=0.5, dtype=torch.float64)
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0]], dtype=torch.float64)
    y = norm(x, training=True)
    torch.testing.assert_close(norm.moving_mean, torch.tensor([1.0, 2.0], dtype=torch.float64))
    torch.testing.assert_close(norm.moving_variance, torch.tensor([1.0, 2.5], dtype=torch.float64))
    torch.testing.assert_close(y.mean(dim=0), torch.zeros(2, dtype=torch.float64))
    inferred = norm(x)  # training=None: the moving averages
    expected = (x - norm.moving_mean) / torch.sqrt(norm.moving_variance + 1e-3)
    torch.testing.assert_close(inferred, expected)


def test_dropout_is_the_identity_unless_training() -> None:
    x = torch.ones(100)
    assert torch.equal(layers.Dropout(0.5)(x), x)
    kept = layers.Dropout(0.5)(x, training=True)
    assert set(kept.unique().tolist()) <= {0.0, 2.0}


def test_conv2d_channels_first_matches_channels_last() -> None:
    torch.manual_seed(0)
    last = layers.Conv2D(3, 2, strides=2, padding="same", dtype=torch.float64)
    first = layers.Conv2D(3, 2, strides=2, padding="same", data_format="channels_first")
    first.dtype = torch.float64
    x = torch.randn(1, 5, 5, 2, dtype=torch.float64)
    y = last(x)
    first(x.permute(0, 3, 1, 2))
    with torch.no_grad():
        first.kernel.copy_(last.kernel), first.bias.copy_(last.bias)
    torch.testing.assert_close(first(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1), y)
    assert y.shape == (1, 3, 3, 3)


def test_convert_to_tensor_takes_tf_dtypes_and_refuses_as_tf() -> None:
    assert tf_ops.convert_to_tensor(True).dtype == torch.bool
    assert tf_ops.convert_to_tensor(2**40).dtype == torch.int64
    assert tf_ops.convert_to_tensor([1, 2.5]).dtype == torch.float32
    assert tf_ops.convert_to_tensor(3, dtype_hint=torch.float64).dtype == torch.float64
    assert tf_ops.convert_to_tensor(0.5, dtype_hint=torch.int32).dtype == torch.float32
    with pytest.raises(ValueError, match=re.escape("tensor was asked to become torch.float32")):
        tf_ops.convert_to_tensor(torch.ones(1, dtype=torch.float64), dtype=torch.float32)
    with pytest.raises(TypeError, match="TF refuses to truncate Python floats"):
        tf_ops.convert_to_tensor(0.5, dtype=torch.int32)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [(torch.int8, torch.float32), (torch.int16, torch.float32), (torch.int32, torch.float64)],
)
def test_divide_makes_integers_floats_as_tf(dtype: torch.dtype, expected: torch.dtype) -> None:
    result = tf_ops.divide(torch.tensor([3], dtype=dtype), torch.tensor([2], dtype=dtype))
    assert result.dtype == expected and result.item() == 1.5


def test_an_empty_axis_reduces_nothing_as_in_tf() -> None:
    x = torch.arange(6.0).reshape(2, 3)
    assert torch.equal(tf_ops.reduce_sum(x, []), x)
    assert torch.equal(tf_ops.reduce_prod(x + 1, [0, 1], keepdims=True), torch.tensor([[720.0]]))


def test_where_v1_refuses_what_tf1_refuses() -> None:
    with pytest.raises(ValueError, match="TF1's where needs x and y of one shape"):
        tf_ops.where_v1(torch.tensor([True, False]), torch.ones(3), torch.zeros(3))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_over_an_axis_known_at_run_time_is_tf_s(op: str) -> None:
    x = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]], dtype=torch.float64)
    helper, reference = getattr(tf_ops, op), getattr(torch, op)
    assert torch.equal(helper(x, None), reference(x, dim=-1))  # None: the last axis, as in TF
    assert torch.equal(helper(x, 0), reference(x, dim=0))
    assert torch.equal(helper(x, torch.tensor([0])), reference(x, dim=0))
    with pytest.raises(ValueError, match="TF takes one axis"):
        helper(x, [0, 1])


def test_regularized_weights_put_keras_s_penalties_in_losses() -> None:
    outer, inner = layers.Layer(dtype=torch.float64), layers.Layer()
    outer.inner = inner
    w = outer.add_weight(shape=(2,), initializer=layers.Constant(2.0), regularizer="l1_l2")
    v = inner.add_weight(shape=(2,), initializer="ones", regularizer=layers.L2(0.1))
    inner.add_weight(shape=(2,), initializer="ones", trainable=False, regularizer="l1")
    inner.add_loss(torch.tensor(7.0))
    assert outer.losses[0].item() == 7.0 and outer.losses[1].item() == 0.0  # L1L2: 0 and 0
    assert outer.losses[2].dtype == torch.float32  # in the weight's dtype, as Keras
    assert outer.losses[2] == torch.tensor(0.1, dtype=torch.float32) * 2 and len(outer.losses) == 3
    with torch.no_grad():
        v.mul_(3.0)  # recomputed from the current value
    (penalty,) = torch.autograd.grad(outer.losses[2], v)
    assert torch.equal(penalty, torch.tensor(0.1) * 2 * v) and w.dtype == torch.float64
    assert layers.L1(0.5)(torch.tensor([-1.0, 3.0])).item() == 2.0
    # Keras 3 converts the factor to a float32 tensor, then casts it to the weight's dtype
    one = torch.ones(1, dtype=torch.float64)
    assert layers.L2(0.1)(one).item() == torch.tensor(0.1, dtype=torch.float32).item() != 0.1


def test_tf1_div_floors_integers_and_divides_floats() -> None:
    ints = tf_ops.div_v1(torch.tensor([7, -7], dtype=torch.int32), 2)
    assert ints.dtype == torch.int32 and ints.tolist() == [3, -4]
    assert tf_ops.div_v1(torch.tensor([-7.0], dtype=torch.float64), 2).tolist() == [-3.5]
    assert tf_ops.keras_clip(torch.tensor([0.0, 2.0]), 1.0, 0.5).tolist() == [1.0, 1.0]


def test_top_k_orders_ties_as_tf_and_check_numerics_checks_the_gradient_too() -> None:
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0]], requires_grad=True)
    values, indices = tf_ops.top_k(x, 3)
    assert indices.tolist() == [[1, 2, 3]] and indices.dtype == torch.int32
    (grad,) = torch.autograd.grad(values.sum(), x)
    assert grad.tolist() == [[0.0, 1.0, 1.0, 1.0]]
    with pytest.raises(tf_ops.InvalidArgumentError, match=r"^y : Tensor had NaN values"):
        tf_ops.check_numerics(torch.tensor([float("nan")]), "y")
    y = tf_ops.check_numerics(x, "x")
    assert torch.equal(y, x)
    with pytest.raises(ValueError, match="in the gradient: x : Tensor had Inf values"):
        (y * torch.tensor([float("inf"), 1.0, 1.0, 1.0])).sum().backward()


def test_gradients_is_tf_gradients_on_the_recorded_graph() -> None:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    unused = torch.tensor(3.0, requires_grad=True)
    y = x * x
    gx, none = tf_ops.gradients(y, [x, unused], grad_ys=torch.tensor([1.0, 0.5]))
    assert torch.equal(gx, torch.tensor([2.0, 2.0])) and none is None
    assert torch.equal(tf_ops.gradients([y], [unused], unconnected_gradients="zero")[0], 0 * unused)
    (gg,) = torch.autograd.grad(gx.sum(), x)  # differentiable again, as TF's graph
    assert torch.equal(gg, torch.tensor([2.0, 1.0]))
    with pytest.raises(ValueError, match=r"xs\[0\] does not require grad"):
        tf_ops.gradients(y, torch.tensor(1.0))


def test_tape_gradient_keeps_the_structure_of_its_sources() -> None:
    a, b = torch.tensor(2.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    (ga,), [gb] = tf_ops.tape_gradient(a * b, ((a,), [b]), output_gradients=torch.tensor(2.0))
    assert (ga.item(), gb.item()) == (6.0, 4.0)
    assert tf_ops.tape_gradient(a * b, ((), [])) == ((), [])


def test_scopes_change_nothing_and_name_the_scope() -> None:
    with tf_ops.name_scope("block") as scope, tf_ops.device("/gpu:0"):
        assert scope == "block/"
    with tf_ops.name_scope(None, "default", [1]) as scope:
        assert scope == "default/"


def test_random_ops_keep_tf_arguments_and_distributions() -> None:
    torch.manual_seed(0)
    u = tf_ops.random_uniform(torch.tensor([4000], dtype=torch.int32), minval=-0.5, maxval=0.5)
    assert u.dtype == torch.float32 and u.shape == (4000,) and -0.5 <= u.min() < u.max() < 0.5
    assert abs(u.mean().item()) < 0.03 and abs(u.var().item() - 1 / 12) < 0.01
    n = tf_ops.random_normal((4000,), mean=1.0, stddev=2.0, dtype=torch.float64)
    assert n.dtype == torch.float64 and abs(n.mean().item() - 1) < 0.15
    t = tf_ops.truncated_normal([4000], stddev=0.5)
    assert t.abs().max() <= 1.0 and abs(t.std().item() - 0.5 * 0.8796) < 0.03
    ints = tf_ops.random_uniform([50], minval=2, maxval=5, dtype=torch.int32)
    assert ints.dtype == torch.int32 and set(ints.tolist()) <= {2, 3, 4}
    with pytest.raises(ValueError, match="needs maxval"):
        tf_ops.random_uniform([2], dtype=torch.int64)
    low = torch.tensor(0.0, requires_grad=True)
    (g,) = torch.autograd.grad(tf_ops.random_uniform([3], minval=low, maxval=1.0).sum(), low)
    assert 0 < g.item() < 3  # sum(1 - u): tensor bounds get gradients, as in TF


def test_svd_is_tf_order_and_band_part_keeps_the_band() -> None:
    x = torch.tensor([[2.0, 0.5, -0.3], [0.1, 1.5, 0.4]], dtype=torch.float64)
    s, u, v = tf_ops.svd(x)
    assert u.shape == (2, 2) and v.shape == (3, 2) and torch.allclose(u @ torch.diag(s) @ v.mT, x)
    assert torch.equal(tf_ops.svd(x, compute_uv=False), s)
    band = tf_ops.band_part(torch.ones(4, 4), 1, 0)
    assert band.sum() == 7 and band[3, 2] == 1 and band[2, 3] == 0
    assert torch.equal(
        tf_ops.cumprod(torch.tensor([2.0, 3.0, 4.0]), reverse=True), torch.tensor([24.0, 12.0, 4.0])
    )
    assert tf_ops.cumsum(torch.zeros(2, 0), axis=1, exclusive=True).shape == (2, 0)


def test_keras_relu_is_keras_formula() -> None:
    x = torch.tensor([-2.0, 0.0, 0.5, 1.0, 3.0, 6.0, 8.0], requires_grad=True)
    assert layers.ReLU()(x).tolist() == [0.0, 0.0, 0.5, 1.0, 3.0, 6.0, 8.0]
    assert layers.ReLU(max_value=6.0)(x).tolist() == [0.0, 0.0, 0.5, 1.0, 3.0, 6.0, 6.0]
    y = layers.ReLU(max_value=2.0, negative_slope=0.5, threshold=1.0)(x)
    assert y.tolist() == [-1.5, -0.5, -0.25, 0.0, 2.0, 2.0, 2.0]
    assert layers.LeakyReLU(alpha=0.5)(x)[0].item() == -1.0  # Keras 2's name
    assert layers.Softmax(axis=0)(x).sum().item() == pytest.approx(1.0)
