"""Faults leave no trace: an exception in f or in grad_fn restores every piece of global state.

For each fault (an Exception or a KeyboardInterrupt-like BaseException, raised in f before or
after it reads a Parameter, or in grad_fn, or a library error) and each context the call may be
made in (plain, no_grad, inference_mode, autocast, saved-tensor hooks, a user's
TorchFunctionMode, torch.func.grad / vmap), the state inside the context and after leaving it is
exactly as before, the decorated object's own state is unchanged, and the next call gives the
right gradient.
"""

import contextlib
import itertools
import warnings

import pytest
import torch
from helpers import D
from torch.overrides import TorchFunctionMode

from tf_compat_grad import CustomGradientTypeError, CustomGradientValueError, custom_gradient


class Interrupt(BaseException):
    """Like KeyboardInterrupt: not an Exception, so `except Exception` does not catch it."""


class Boom(ValueError):
    pass


def _top_saved_tensor_hooks():
    """The innermost default saved-tensor hooks; torch < 2.5 has no way to read them, and then
    only `saved_tensor_hooks_enabled` below is compared."""
    top = getattr(torch._C._autograd, "_top_saved_tensors_default_hooks", None)
    return top(False) if top is not None else "unreadable"


def snapshot():
    """Every piece of global state a custom gradient could leave changed."""
    return {
        "grad": torch.is_grad_enabled(),
        "inference": torch.is_inference_mode_enabled(),
        "fwd_grad": torch._C._is_fwd_grad_enabled(),
        "autocast_cpu": torch.is_autocast_enabled("cpu"),
        "autocast_cpu_dtype": torch.get_autocast_dtype("cpu"),
        "autocast_cache": torch.is_autocast_cache_enabled(),
        "function_modes": torch._C._len_torch_function_stack(),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "torch_function_enabled": torch._C._is_torch_function_enabled(),
        "saved_tensor_hooks": _top_saved_tensor_hooks(),
        "saved_tensor_hooks_enabled": torch._C._autograd._saved_tensors_hooks_is_enabled(),
        "functorch_stack": torch._C._functorch.peek_interpreter_stack(),
        "functorch_depth": torch._C._functorch.get_dynamic_layer_stack_depth(),
        "forward_ad_level": torch.autograd.forward_ad._current_level,
        "anomaly": torch.is_anomaly_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "rng": torch.get_rng_state().tolist(),
    }


W = torch.nn.Parameter(torch.tensor([0.5, -1.0], dtype=D))
FAULT = {"where": None, "exc": None}


def maybe_fail(where):
    if FAULT["where"] == where:
        raise FAULT["exc"](f"injected in {where}")


@custom_gradient
def scaled_exp(x, scale):
    """`exp(x) * W * scale`; its custom gradient is 3x the true one for x and 5x for W."""
    maybe_fail("f_before_ops")
    e = torch.exp(x)  # an intermediate grad_fn closes over
    y = e * W * scale
    maybe_fail("f_after_ops")

    def grad_fn(d_unused, dy, variables=None):  # sorted keys: "unused" < "y"
        maybe_fail("grad_fn")
        if FAULT["where"] == "grad_fn_count":
            return (dy, dy, dy), [None]  # a library error: 3 gradients for 2 inputs
        return (3 * dy * e * W * scale, None), [5 * (dy * e * scale)]

    return {"y": y, "unused": e.sum()}, grad_fn


def expected_grads(x, scale=2.0):
    e = torch.exp(x.detach())
    return 3 * e * W.detach() * scale, 5 * e * scale


def check_next_call_works():
    """A clean call afterwards gives the custom gradients, in a clean state."""
    FAULT["where"] = None
    x = torch.tensor([0.25, 1.5], dtype=D, requires_grad=True)
    W.grad = None
    out = scaled_exp(x, 2.0)
    torch.testing.assert_close(out["y"], torch.exp(x.detach()) * W.detach() * 2.0)
    out["y"].sum().backward()
    dx, dw = expected_grads(x)
    torch.testing.assert_close(x.grad, dx)
    torch.testing.assert_close(W.grad, dw)
    W.grad = None


def library_state(fn):
    return dict(vars(fn))


@contextlib.contextmanager
def user_saved_tensor_hooks():
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        yield


class UserMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


CONTEXTS = {
    "plain": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "enable_grad_in_no_grad": lambda: _nested(torch.no_grad(), torch.enable_grad()),
    "inference_mode": torch.inference_mode,
    "autocast_bf16": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "saved_tensor_hooks": user_saved_tensor_hooks,
    "user_function_mode": UserMode,
    "anomaly_mode": lambda: anomaly_mode(),
}


@contextlib.contextmanager
def anomaly_mode():
    # detect_anomaly warns that it is slow, and reports failed backwards as warnings too.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with torch.autograd.detect_anomaly():
            yield


@contextlib.contextmanager
def _nested(*managers):
    with contextlib.ExitStack() as stack:
        for manager in managers:
            stack.enter_context(manager)
        yield


def run_forward_backward():
    x = torch.tensor([0.25, 1.5], dtype=D, requires_grad=True)
    out = scaled_exp(x, 2.0)
    if torch.is_grad_enabled():
        out["y"].sum().backward()


FAULTS = [
    ("f_before_ops", Boom),
    ("f_after_ops", Boom),
    ("grad_fn", Boom),
    ("f_before_ops", Interrupt),
    ("f_after_ops", Interrupt),
    ("grad_fn", Interrupt),
    ("f_after_ops", KeyboardInterrupt),
    ("grad_fn_count", CustomGradientValueError),
]


@pytest.mark.parametrize(
    ("context", "fault"),
    list(itertools.product(CONTEXTS, FAULTS)),
    ids=[f"{c}-{w}-{e.__name__}" for c, (w, e) in itertools.product(CONTEXTS, FAULTS)],
)
def test_fault_leaves_no_trace(context, fault):
    where, exc = fault
    check_next_call_works()  # warm: the decorated object has reached its steady state
    outside = snapshot()
    before = library_state(scaled_exp)
    no_backward = context in ("no_grad", "inference_mode") and where.startswith("grad_fn")
    with CONTEXTS[context]():
        inside = snapshot()
        FAULT.update(where=where, exc=exc)
        try:
            if no_backward:
                run_forward_backward()  # grad_fn never runs: no fault, no trace either
            else:
                with pytest.raises(exc):
                    run_forward_backward()
        finally:
            FAULT["where"] = None
        assert snapshot() == inside
    assert snapshot() == outside
    assert library_state(scaled_exp) == before
    check_next_call_works()
    assert snapshot() == outside


@pytest.mark.parametrize("exc", [Boom, Interrupt])
def test_fault_in_f_on_the_first_no_grad_call(exc):
    """The no_grad path watches for Parameters until one call has passed the check."""

    @custom_gradient
    def fresh(x):
        maybe_fail("f_after_ops")
        y = x * W

        def grad_fn(dy, variables=None):
            return dy * 7, [None]

        return y, grad_fn

    outside = snapshot()
    before = library_state(fresh)
    with torch.no_grad():
        FAULT.update(where="f_after_ops", exc=exc)
        try:
            with pytest.raises(exc):
                fresh(torch.ones(2, dtype=D))
        finally:
            FAULT["where"] = None
        assert not torch.is_grad_enabled()
        assert torch._C._len_torch_function_stack() == 0
    assert snapshot() == outside
    assert library_state(fresh) == before
    with torch.no_grad():  # the check still runs on the next no_grad call, and passes
        torch.testing.assert_close(fresh(torch.ones(2, dtype=D)), W.detach())
    x = torch.ones(2, dtype=D, requires_grad=True)
    fresh(x).sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 7.0, dtype=D))


def test_variables_check_failure_leaves_no_trace():
    @custom_gradient
    def no_variables_param(x):
        return x * W, lambda dy: dy

    outside = snapshot()
    before = library_state(no_variables_param)
    for grad_enabled in (True, False, False):
        with torch.set_grad_enabled(grad_enabled), pytest.raises(CustomGradientTypeError):
            no_variables_param(torch.ones(2, dtype=D, requires_grad=True))
    assert snapshot() == outside
    assert library_state(no_variables_param) == before
    check_next_call_works()


def test_fault_in_grad_fn_restores_autocast_of_the_backward_caller():
    """grad_fn runs in the forward's autocast state (library feature); a fault in grad_fn must
    not leave that state on for the caller of backward."""
    x = torch.tensor([0.25, 1.5], dtype=D, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = scaled_exp(x, 2.0)["y"].sum()
    outside = snapshot()
    FAULT.update(where="grad_fn", exc=Interrupt)
    try:
        with pytest.raises(Interrupt):
            y.backward()
    finally:
        FAULT["where"] = None
    assert snapshot() == outside
    assert not torch.is_autocast_enabled("cpu")
    check_next_call_works()


@pytest.mark.slow
@pytest.mark.parametrize(("where", "exc"), [("f_after_ops", Boom), ("grad_fn", Interrupt)])
@pytest.mark.parametrize("transform", ["grad", "vmap_grad", "grad_grad", "jacrev", "jvp"])
def test_fault_inside_a_torch_func_transform(transform, where, exc):
    def loss(x):
        return scaled_exp(x, 2.0)["y"].sum()

    x = torch.tensor([0.25, 1.5], dtype=D)
    run = {
        "grad": lambda: torch.func.grad(loss)(x),
        "vmap_grad": lambda: torch.func.vmap(torch.func.grad(loss))(x.expand(3, 2)),
        "grad_grad": lambda: torch.func.grad(lambda x: torch.func.grad(loss)(x).sum())(x),
        "jacrev": lambda: torch.func.jacrev(lambda x: scaled_exp(x, 2.0)["y"])(x),
        "jvp": lambda: torch.func.jvp(loss, (x,), (torch.ones_like(x),)),
    }[transform]
    expected, _ = expected_grads(x)
    torch.testing.assert_close(torch.func.grad(loss)(x), expected)  # warm
    outside = snapshot()
    before = library_state(scaled_exp)
    FAULT.update(where=where, exc=exc)
    try:
        with pytest.raises(exc):
            run()
    finally:
        FAULT["where"] = None
    assert snapshot() == outside
    assert library_state(scaled_exp) == before
    torch.testing.assert_close(torch.func.grad(loss)(x), expected)
    check_next_call_works()


def test_fault_in_f_rerun_under_grad_of_grad():
    """Under grad(grad(.)) f runs again in backward with its first run's random state; a fault
    in that second run must leave the caller's random state and the transform stack as they
    were."""
    calls = []
    failing = {"run": 2}

    @custom_gradient
    def noisy_square(x):
        calls.append(1)
        if len(calls) == failing["run"]:
            raise Boom("second run")
        noise = torch.rand(())  # draws: the rerun restores the first run's RNG state
        return x * x + noise * 0, lambda dy: dy * 2 * x

    x = torch.tensor(1.5, dtype=D)
    torch.manual_seed(0)
    outside = snapshot()
    with pytest.raises(Boom, match="second run"):
        torch.func.grad(torch.func.grad(noisy_square))(x)
    assert len(calls) == 2
    after = snapshot()
    # The first run drew one number; the failed rerun must not have moved the state further.
    torch.manual_seed(0)
    torch.rand(())
    outside["rng"] = torch.get_rng_state().tolist()
    assert after == outside
    failing["run"] = None
    torch.testing.assert_close(torch.func.grad(torch.func.grad(noisy_square))(x), x * 0 + 2)


def test_many_faults_in_a_row_then_success():
    outside = snapshot()
    for i in range(200):
        where, exc = FAULTS[i % len(FAULTS)]
        FAULT.update(where=where, exc=exc)
        try:
            with pytest.raises(exc):
                run_forward_backward()
        finally:
            FAULT["where"] = None
    assert snapshot() == outside
    check_next_call_works()
