"""Stress and leaks: 10,000 calls of a decorated op keep memory flat.

The op closes over a forward intermediate, reads a Parameter it is not passed, takes nested and
keyword arguments and returns nested outputs. After a warm-up, three things are measured before
and after the 10,000 iterations: live tensor storages reachable from Python objects (found with
`gc.get_objects()`, deduplicated by storage pointer), the number of gc-tracked Python objects,
and the process RSS (from /proc/self/statm, after `malloc_trim`). Each op call allocates 16 KiB
tensors, so a leak of one tensor per call would grow RSS by 160 MiB; the tolerance is 8 MiB.
The figures are printed at the end of the module.

Item numbers refer to docs/tensorflow_semantics.md.
"""

import ctypes
import ctypes.util
import gc
import os

import pytest
import torch
from helpers import D

from tf_compat_grad import custom_gradient

pytestmark = pytest.mark.slow

N = 2048  # 16 KiB of float64 per tensor
ITERATIONS = 10_000
WARMUP = 500
RSS_TOLERANCE = 8 * 2**20
OBJECT_TOLERANCE = 300  # gc-tracked objects: a per-call leak would add >= 10,000
PAGE = os.sysconf("SC_PAGE_SIZE")
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
_MALLOC_TRIM = getattr(_LIBC, "malloc_trim", None)  # glibc only
FIGURES = []


@pytest.fixture(scope="module", autouse=True)
def report_figures(terminal_report):
    yield
    if FIGURES:
        terminal_report(
            ["test_stress memory figures (after warm-up -> after the run):"]
            + ["  " + line for line in FIGURES]
        )


def rss():
    """Resident memory, after glibc has handed the free heap back (it keeps freed memory at
    the top of the heap otherwise, and RSS would then depend on where the last free was)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def live_tensors():
    """(bytes, storages) of the tensors reachable from Python objects, each storage once."""
    storages = {}
    tensor_type = torch.Tensor
    for obj in gc.get_objects():
        # type(), not isinstance(): some objects warn when their `__class__` is read.
        kind = type(obj)
        # Fake tensors left by torch.compile tests elsewhere in the run hold no data, nor do
        # the functorch wrappers of fakes that Dynamo keeps after compiling under torch.func.
        if (
            issubclass(kind, tensor_type)
            and obj.layout is torch.strided
            and not torch._C._functorch.is_functorch_wrapped_tensor(obj)
            and kind.__name__
            not in (
                "FakeTensor",
                "FunctionalTensor",
            )
        ):
            storage = obj.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values()), len(storages)


def measure():
    gc.collect()
    tensor_bytes, storages = live_tensors()
    return {
        "rss": rss(),
        "tensor_bytes": tensor_bytes,
        "storages": storages,
        "objects": len(gc.get_objects()),
    }


def assert_flat(name, iterations, before, after):
    FIGURES.append(
        f"{name} ({iterations} iterations): RSS {before['rss'] / 2**20:.1f} -> "
        f"{after['rss'] / 2**20:.1f} MiB; live tensors {before['tensor_bytes']} -> "
        f"{after['tensor_bytes']} bytes in {before['storages']} -> {after['storages']} "
        f"storages; gc objects {before['objects']} -> {after['objects']}"
    )
    assert after["tensor_bytes"] <= before["tensor_bytes"], (before, after)
    assert after["storages"] <= before["storages"], (before, after)
    assert after["objects"] - before["objects"] < OBJECT_TOLERANCE, (before, after)
    assert after["rss"] - before["rss"] < RSS_TOLERANCE, (before, after)


def assert_calls_flat(name, call, check, iterations, warmup):
    """`call()` `warmup` times, then `iterations` times between two measurements, with `check()`
    (which asserts the gradients are still right) before each measurement."""
    for _ in range(warmup):
        call()
    check()
    before = measure()
    for _ in range(iterations):
        call()
    check()
    assert_flat(name, iterations, before, measure())


class Fail(Exception):
    pass


W = torch.nn.Parameter(torch.linspace(-1, 1, N, dtype=D))
PLAN = {"fail_in": None}


@custom_gradient
def op(x, extras, *, scale):
    """Nested outputs; grad_fn closes over the intermediate `e` and reads the Parameter W."""
    if PLAN["fail_in"] == "f":
        raise Fail("f")
    e = torch.exp(x)
    h = e * W

    def grad_fn(d_pair0, d_pair1, d_total, variables=None):  # sorted: "pair" < "total"
        if PLAN["fail_in"] == "grad_fn":
            raise Fail("grad_fn")
        dx = (d_pair0 + 2 * d_pair1 + d_total) * e * W * 3
        return (dx, [None, None]), [d_pair0 * e * 5]

    return {"total": h.sum() * scale, "pair": (h, h * 2)}, grad_fn


def make_input():
    return torch.linspace(-0.5, 0.5, N, dtype=D).requires_grad_()


def forward_backward(x):
    out = op(x, [1.0, "label"], scale=2.0)
    (out["total"] + out["pair"][0].sum()).backward()


def check_gradients(x):
    """One more call gives the custom gradients: upstream 1 for pair[0] and for total.

    Also run during warm-up, so that whatever `assert_close` imports lazily is there before
    the first measurement.
    """
    x.grad = W.grad = None
    forward_backward(x)
    e = torch.exp(x.detach())
    torch.testing.assert_close(x.grad, (1 + 1) * e * W.detach() * 3)
    torch.testing.assert_close(W.grad, e * 5)
    x.grad = W.grad = None


def test_forward_backward_10k_memory_flat():
    x = make_input()

    def call():
        forward_backward(x)
        x.grad = W.grad = None

    assert_calls_flat("forward+backward", call, lambda: check_gradients(x), ITERATIONS, WARMUP)


def test_graph_dropped_without_backward_10k_memory_flat():
    x = make_input()
    assert_calls_flat(
        "forward only, graph dropped",
        lambda: op(x, [1.0, "label"], scale=2.0),
        lambda: check_gradients(x),
        ITERATIONS,
        WARMUP,
    )


def test_graph_kept_then_dropped_in_batches_memory_flat():
    """Graphs alive at the same time (100 of them) are all freed when dropped."""
    x = make_input()

    def batch():
        outs = [op(x, [1.0, "label"], scale=2.0) for _ in range(100)]
        del outs

    batch()  # warm-up: the allocator's high-water mark for 100 live graphs
    check_gradients(x)
    before = measure()
    for _ in range(ITERATIONS // 100):
        batch()
    check_gradients(x)
    assert_flat("100 graphs alive, then dropped", ITERATIONS, before, measure())


def test_exceptions_every_10th_call_memory_flat():
    x = make_input()
    failures = {"f": 0, "grad_fn": 0}

    def iteration(i):
        PLAN["fail_in"] = {0: "f", 5: "grad_fn"}.get(i % 10)
        try:
            forward_backward(x)
        except Fail as error:
            failures[str(error)] += 1
        finally:
            PLAN["fail_in"] = None
        x.grad = W.grad = None

    for i in range(WARMUP):
        iteration(i)
    check_gradients(x)
    failures.update(f=0, grad_fn=0)
    before = measure()
    for i in range(ITERATIONS):
        iteration(i)
    assert failures == {"f": ITERATIONS // 10, "grad_fn": ITERATIONS // 10}
    check_gradients(x)
    assert_flat("exceptions in f and grad_fn every 10th call", ITERATIONS, before, measure())


def second_order(x):
    """create_graph=True through grad_fn's closure over `e` (the higher-order path)."""
    out = op(x, [1.0, "label"], scale=2.0)
    (gx,) = torch.autograd.grad(out["total"], x, create_graph=True)
    (ggx,) = torch.autograd.grad(gx.sum(), x)
    W.grad = None
    return ggx


def check_second_order(x):
    # d/dx sum(3 * e * W) = 3 * e * W: the derivative of grad_fn's closure (item 40).
    torch.testing.assert_close(second_order(x), 3 * torch.exp(x.detach()) * W.detach())


def test_second_order_2k_memory_flat():
    x = make_input()
    assert_calls_flat(
        "second order (create_graph)",
        lambda: second_order(x),
        lambda: check_second_order(x),
        ITERATIONS // 5,
        WARMUP // 5,
    )


def loss(x):
    return op(x, [1.0, "label"], scale=2.0)["total"]


def check_func_grad(x):
    torch.testing.assert_close(torch.func.grad(loss)(x), 3 * torch.exp(x) * W.detach())


def test_torch_func_grad_2k_memory_flat():
    x = torch.linspace(-0.5, 0.5, N, dtype=D)
    grad = torch.func.grad(loss)
    assert_calls_flat(
        "torch.func.grad",
        lambda: grad(x),
        lambda: check_func_grad(x),
        ITERATIONS // 5,
        WARMUP // 5,
    )
