"""Decorated layers under data parallelism: DDP and FSDP2 on gloo, two CPU processes.

Each rank runs `_ddp_worker.Net` (a decorated `forward` with `variables`, `log1pexp`, a
`recompute_grad` block and a `grad_pass_through` op) on its half of the batch; the averaged
gradients must equal one process's gradient on the whole batch. Deselect with
`-m "not distributed"` (or `-k "not distributed"`).
"""

import time
import warnings
from pathlib import Path

# `_ddp_worker` is imported by its plain name (tests/ is on pytest's pythonpath): the spawned
# processes unpickle its objects by that name.
import _ddp_worker as worker
import pytest
import torch
import torch.distributed as dist

pytestmark = [
    pytest.mark.slow,
    pytest.mark.distributed,
    pytest.mark.skipif(
        not dist.is_available() or not dist.is_gloo_available(),
        reason="torch.distributed with the gloo backend is not available",
    ),
]

TIMEOUT_S = 120.0  # a hung collective fails the test instead of blocking CI
TOL = {"rtol": 1e-12, "atol": 1e-12}


def reference_gradients() -> dict[str, torch.Tensor]:
    """One process, the whole batch."""
    net = worker.Net()
    worker.loss(net, worker.batch()).backward()
    return worker.gradients(net)


def spawn(wrapper: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Run `_ddp_worker.run` on WORLD_SIZE spawned ranks; each rank's gradients.

    Warnings the ranks caught are raised again here, so filterwarnings=error and targeted
    filterwarnings marks treat them as they treat warnings of this process.
    """
    monkeypatch.syspath_prepend(str(Path(__file__).parent))  # sys.path the children start with
    context = torch.multiprocessing.spawn(
        worker.run,
        args=(worker.WORLD_SIZE, f"file://{tmp_path / 'rendezvous'}", wrapper, str(tmp_path)),
        nprocs=worker.WORLD_SIZE,
        join=False,
    )
    deadline = time.monotonic() + TIMEOUT_S
    while not context.join(timeout=max(deadline - time.monotonic(), 0.0)):
        if time.monotonic() >= deadline:
            for process in context.processes:
                process.kill()
            for process in context.processes:
                process.join()
            pytest.fail(f"{wrapper} ranks did not finish within {TIMEOUT_S:.0f} s (hang)")
    results = [
        torch.load(tmp_path / f"rank{rank}.pt", weights_only=False)
        for rank in range(worker.WORLD_SIZE)
    ]
    for result in results:
        for category, message in result["warnings"]:
            warnings.warn(message, category, stacklevel=1)
    return [result["grads"] for result in results]


def assert_gradients_equal(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(got[name], grad, **TOL, msg=lambda m, name=name: f"{name}: {m}")


def test_reference_matches_plain_autograd():
    """The single-process reference is the true gradient (round straight-through)."""
    net = worker.Net()
    l1, l2, l3 = net.l1, net.l2, net.l3

    def plain(x):
        h = torch.log(1 + torch.exp(x @ l1.weight.T + l1.bias))
        h = torch.tanh(h @ l2.weight.T) * 4
        h = (h + (torch.round(h) - h).detach()) / 4
        return h @ l3.weight.T + l3.bias

    plain(worker.batch()).pow(2).sum(1).mean().backward()
    expected = {name: p.grad.clone() for name, p in net.named_parameters()}
    assert all(grad.abs().sum() > 0 for grad in expected.values())
    assert_gradients_equal(reference_gradients(), expected)


def test_ddp_gradients_match_single_process(tmp_path, monkeypatch):
    expected = reference_gradients()
    for grads in spawn("ddp", tmp_path, monkeypatch):
        assert_gradients_equal(grads, expected)


def test_fsdp2_gradients_match_single_process(tmp_path, monkeypatch):
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError as error:
        pytest.skip(f"FSDP2 (fully_shard) is not in this torch: {error}")
    if not hasattr(torch.cpu.Stream, "record_event"):  # torch 2.6: FSDP2 records CPU stream events
        pytest.skip("FSDP2 on CPU needs `torch.cpu.Stream.record_event`, which this torch lacks")
    expected = reference_gradients()
    for grads in spawn("fsdp2", tmp_path, monkeypatch):
        assert_gradients_equal(grads, expected)
