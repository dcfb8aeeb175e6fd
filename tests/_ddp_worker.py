"""The model and the per-rank worker of `test_distributed.py`.

A module of its own because `spawn` starts fresh interpreters that import the worker by name:
`test_distributed.py` puts this folder on `sys.path` while it spawns.
"""

import os
import sys
import warnings
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from tf_compat_grad import custom_gradient, grad_pass_through, recompute_grad
from tf_compat_grad.examples import log1pexp

D = torch.float64
WORLD_SIZE = 2
BATCH = 8  # split evenly over the ranks, so DDP's mean of shard means is the full-batch mean


class DecoratedLinear(nn.Module):
    """`x @ W.T + b` as a decorated `forward` that reads its Parameters (grad_fn gets them as
    `variables`)."""

    def __init__(self, n_in: int, n_out: int, generator: torch.Generator) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in, dtype=D, generator=generator))
        self.bias = nn.Parameter(torch.randn(n_out, dtype=D, generator=generator))

    @custom_gradient
    def forward(self, x):
        y = x @ self.weight.T + self.bias

        def grad_fn(dy, variables=None):
            # FSDP2 swaps the Parameters for unsharded ones: look them up now, by identity.
            grads = {id(self.weight): dy.T @ x, id(self.bias): dy.sum(0)}
            assert variables is not None and {id(v) for v in variables} == grads.keys()
            return dy @ self.weight, [grads[id(v)] for v in variables]

        return y, grad_fn


class RecomputedTanh(nn.Module):
    """`tanh(x @ W.T)` through `recompute_grad`, which reads W as a variable and differentiates
    a second run of the block in backward."""

    def __init__(self, n: int, generator: torch.Generator) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n, n, dtype=D, generator=generator))
        self.block = recompute_grad(self._block)

    def _block(self, x):
        return torch.tanh(x @ self.weight.T)

    def forward(self, x):
        return self.block(x)


round_pass_through = grad_pass_through(torch.round)


class Net(nn.Module):
    """decorated Linear -> log1pexp -> recomputed tanh Linear -> straight-through round ->
    decorated Linear. Autodiff of `round` is zero, so the first two layers get a nonzero
    gradient only through the pass-through node."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.l1 = DecoratedLinear(3, 4, generator)
        self.l2 = RecomputedTanh(4, generator)
        self.l3 = DecoratedLinear(4, 2, generator)

    def forward(self, x):
        h = log1pexp(self.l1(x))
        h = round_pass_through(self.l2(h) * 4) / 4
        return self.l3(h)


def batch() -> torch.Tensor:
    return torch.randn(BATCH, 3, dtype=D, generator=torch.Generator().manual_seed(1))


def shard(rank: int, world_size: int) -> torch.Tensor:
    return batch().chunk(world_size)[rank]


def loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return model(x).pow(2).sum(1).mean()


def gradients(net: nn.Module) -> dict[str, torch.Tensor]:
    """Every Parameter's full gradient (FSDP2 keeps a DTensor shard: gathered, a collective)."""
    grads = {}
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        grad = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        grads[name] = grad.detach().clone()
    return grads


def run(rank: int, world_size: int, init_method: str, wrapper: str, out_dir: str) -> None:
    """One rank: forward/backward on its shard under `wrapper` ("ddp" or "fsdp2"); writes the
    gradients and the warnings raised to `out_dir/rank{rank}.pt`."""
    torch.set_num_threads(1)  # two ranks on a two-core runner
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.init_process_group(
            "gloo",
            init_method=init_method,
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=60),
        )
        net = Net()
        if wrapper == "ddp":
            model: nn.Module = nn.parallel.DistributedDataParallel(net)
        else:
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard

            mesh = init_device_mesh("cpu", (world_size,))
            for layer in (net.l1, net.l2, net.l3):
                fully_shard(layer, mesh=mesh)
            model = fully_shard(net, mesh=mesh)
        loss(model, shard(rank, world_size)).backward()
        grads = gradients(net)
        # Destroying the group while the DDP module is alive can crash or hang
        # (docs/torch_facts.md, "DDP teardown").
        del model
        dist.barrier()
        dist.destroy_process_group()
    found = [(w.category, str(w.message)) for w in caught]
    torch.save({"grads": grads, "warnings": found}, Path(out_dir) / f"rank{rank}.pt")
    # A spawned rank ends with a full interpreter shutdown, which destroys torch.distributed's
    # C++ objects (gloo pairs and work threads, still referenced by the model's tensors) in no
    # set order; in about 1 run of 10 that aborted the rank with "terminate called without an
    # active exception" after its results were written. Everything this rank owes the test is
    # on disk and the group is destroyed, so it leaves without the shutdown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
