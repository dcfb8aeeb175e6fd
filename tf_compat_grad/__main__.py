"""`python -m tf_compat_grad`: a short runnable demo of the quickstart."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the quickstart: TensorFlow's `log1pexp` example, ported, differentiated twice."""
    import torch

    from .examples import log1pexp

    del argv
    x = torch.tensor([0.0, 1.0, 100.0], dtype=torch.float64, requires_grad=True)
    y = log1pexp(x)
    (dy_dx,) = torch.autograd.grad(y.sum(), x, create_graph=True)
    (d2y_dx2,) = torch.autograd.grad(dy_dx.sum(), x)
    sigmoid = torch.sigmoid(x.detach())
    print("tf_compat_grad quickstart: log1pexp(x) = log(1 + exp(x)) with a custom gradient")
    print(f"  x           = {x.detach().tolist()}")
    print(f"  y           = {y.detach().tolist()}")
    print(f"  dy/dx       = {dy_dx.detach().tolist()}   (custom grad_fn; 1.0 at x=100, not nan)")
    print(f"  d2y/dx2     = {d2y_dx2.tolist()}")
    print(f"  sigmoid'(x) = {(sigmoid * (1 - sigmoid)).tolist()}   (expected second derivative)")
    ok = torch.allclose(dy_dx.detach(), sigmoid) and torch.allclose(
        d2y_dx2, sigmoid * (1 - sigmoid)
    )
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
