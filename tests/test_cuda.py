"""The decorator on CUDA tensors, compared with plain autograd of the same math on the same device.

Each test skips without CUDA. What CUDA changes for the library: a gradient grad_fn makes on
another device is moved to its input's (and a CUDA input's gradient is never left on the CPU),
CUDA's own random-number state must be replayed when f runs again (recompute_grad,
checkpointing), autocast's float16 on CUDA, saved tensors offloaded to the CPU and back, and
compiled code that Inductor turns into GPU kernels.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from tf_compat_grad import custom_gradient, examples, recompute_grad
from tf_compat_grad.testing import check

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

CUDA = "cuda"


def leaf(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).to(CUDA).requires_grad_()


def grads(fn, *inputs: torch.Tensor, upstream: torch.Tensor | None = None):
    out = fn(*inputs)
    up = torch.ones_like(out) if upstream is None else upstream
    return out, torch.autograd.grad(out, inputs, up)


def test_log1pexp_matches_autograd_on_cuda():
    x = leaf(1000)
    y, (gx,) = grads(examples.log1pexp, x)
    y_ref, (gx_ref,) = grads(lambda t: torch.log1p(torch.exp(t)), x)
    assert y.device.type == gx.device.type == CUDA
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(gx, gx_ref)


def test_gradient_made_on_the_cpu_is_moved_to_the_inputs_device():
    @custom_gradient
    def square(x):
        def grad(dy):
            return (2 * x * dy).cpu()  # a rule written for the CPU

        return x * x, grad

    x = leaf(7)
    (gx,) = torch.autograd.grad(square(x).sum(), x)
    assert gx.device == x.device
    torch.testing.assert_close(gx, 2 * x.detach())


def test_inputs_on_two_devices_get_gradients_on_their_own():
    @custom_gradient
    def scale(x, s):
        y = x * s.to(x.device)

        def grad(dy):
            return dy * s.to(dy.device), (dy * x).sum().reshape(1)  # s's on CUDA, s is on the CPU

        return y, grad

    x = leaf(5)
    s = torch.tensor([1.5], requires_grad=True)
    gx, gs = torch.autograd.grad(scale(x, s).sum(), (x, s))
    assert gx.device == x.device and gs.device == s.device
    torch.testing.assert_close(gx, torch.full_like(gx, 1.5))
    torch.testing.assert_close(gs, x.detach().sum().reshape(1).cpu())


def test_float16_gradient_is_cast_to_a_float32_input():
    @custom_gradient
    def double(x):
        return 2 * x, lambda dy: (2 * dy).half()

    x = leaf(4)
    (gx,) = torch.autograd.grad(double(x).sum(), x)
    assert gx.dtype == torch.float32
    torch.testing.assert_close(gx, torch.full_like(gx, 2.0))


def linear_reading(w: torch.nn.Parameter):
    """`x @ w.t()` with its rule, w read from the closure (TF's `variables=`)."""

    @custom_gradient
    def linear(x):
        y = x @ w.t()

        def grad(dy, variables=None):
            return dy @ w, [dy.t() @ x]

        return y, grad

    return linear


def test_parameters_on_cuda_get_their_gradients_through_variables():
    w = torch.nn.Parameter(torch.randn(3, 4, device=CUDA))
    linear = linear_reading(w)
    x = leaf(2, 4)
    gx, gw = torch.autograd.grad(linear(x).pow(2).sum(), (x, w))
    gx_ref, gw_ref = torch.autograd.grad((x @ w.t()).pow(2).sum(), (x, w))
    torch.testing.assert_close(gx, gx_ref)
    torch.testing.assert_close(gw, gw_ref)


def test_second_derivative_on_cuda():
    x = leaf(6, seed=1, dtype=torch.float64)
    (g,) = torch.autograd.grad(examples.log1pexp(x).sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    s = torch.sigmoid(x.detach())
    torch.testing.assert_close(h, s * (1 - s))


def dropout_block(x: torch.Tensor) -> torch.Tensor:
    return F.dropout(torch.tanh(x), p=0.5, training=True) * 3


def test_recompute_grad_replays_cudas_random_draws():
    x = leaf(4096, seed=2)
    torch.manual_seed(0)
    y = recompute_grad(dropout_block)(x)
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.manual_seed(0)
    y_ref = dropout_block(x)
    (gx_ref,) = torch.autograd.grad(y_ref.sum(), x)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(gx, gx_ref)
    assert 0 < int((gx == 0).sum()) < x.numel()  # the mask did drop some, not all


def test_checkpoint_of_a_decorated_function_with_dropout():
    def fn(x):
        return examples.log1pexp(F.dropout(x, p=0.3, training=True))

    x = leaf(2048, seed=3)
    torch.manual_seed(1)
    y = checkpoint(fn, x, use_reentrant=False)
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.manual_seed(1)
    mask_out = F.dropout(x, p=0.3, training=True)
    (gx_ref,) = torch.autograd.grad(F.softplus(mask_out).sum(), x)
    torch.testing.assert_close(gx, gx_ref)


def test_saved_tensors_offloaded_to_the_cpu_come_back():
    x = leaf(300, seed=4)
    with torch.autograd.graph.save_on_cpu(pin_memory=True):
        y = examples.log1pexp(x)
    (gx,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(gx, torch.sigmoid(x.detach()))


def test_autocast_float16_on_cuda():
    w = torch.nn.Parameter(torch.randn(5, 4, device=CUDA))
    linear = linear_reading(w)
    x = leaf(3, 4, seed=5)
    with torch.autocast(CUDA, dtype=torch.float16):
        y = linear(x)
    assert y.dtype == torch.float16
    gx, gw = torch.autograd.grad(y.float().sum(), (x, w))
    assert gx.dtype == gw.dtype == torch.float32
    gx_ref, gw_ref = torch.autograd.grad((x @ w.t()).sum(), (x, w))
    torch.testing.assert_close(gx, gx_ref, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(gw, gw_ref, rtol=1e-2, atol=1e-2)


def test_torch_func_grad_and_vmap_on_cuda():
    x = leaf(8, 5, seed=6).detach()
    per_row = torch.func.vmap(torch.func.grad(lambda r: examples.log1pexp(r).sum()))(x)
    torch.testing.assert_close(per_row, torch.sigmoid(x))


@pytest.mark.slow
def test_compiled_with_inductor_on_cuda():
    fn = torch.compile(lambda t: examples.log1pexp(t).sin(), backend="inductor")
    x = leaf(1024, seed=7)
    y, (gx,) = grads(fn, x)
    y_ref, (gx_ref,) = grads(lambda t: F.softplus(t).sin(), x)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(gx, gx_ref)


@pytest.mark.slow
def test_checker_passes_log1pexp_on_cuda():
    x = torch.tensor([-3.0, -0.5, 0.0, 0.7, 2.0, 30.0], device=CUDA)
    report = check(examples.log1pexp, x)
    assert report.ok, str(report)
