import torch

from tf_compat_grad import custom_gradient


def test_log1pexp_gradient_is_finite_at_100():
    @custom_gradient
    def log1pexp(x):
        e = torch.exp(x)

        def grad(dy):
            return dy * (1 - 1 / (1 + e))

        return torch.log(1 + e), grad

    x = torch.tensor(100.0, dtype=torch.float64, requires_grad=True)
    log1pexp(x).backward()
    assert x.grad is not None
    assert x.grad.item() == 1.0
