"""The benchmarked ops, each written three ways: native autograd of the same math, a hand-written
`torch.autograd.Function` with `ctx.save_for_backward` (the reference), and tf_compat_grad.

Every implementation is a plain function of the op's arguments, so each pays the same one Python
frame on top of what it calls, and `torch.compile` sees a function in every case.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from tf_compat_grad import custom_gradient

NATIVE, FUNCTION, TF = "native", "function", "tf_compat_grad"
IMPLS = (NATIVE, FUNCTION, TF)  # FUNCTION is the reference: ratio 1.00


# --- log1pexp: grad_fn closes over `e = exp(x)`, computed in f ----------------------------------


def log1pexp_native(x: Tensor) -> Tensor:
    return torch.log(1 + torch.exp(x))


class Log1pexpFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        e = torch.exp(x)
        ctx.save_for_backward(e)
        return torch.log(1 + e)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> Tensor:
        (e,) = ctx.saved_tensors
        return dy * (1 - 1 / (1 + e))


def log1pexp_function(x: Tensor) -> Tensor:
    return Log1pexpFunction.apply(x)


@custom_gradient
def log1pexp(x):
    e = torch.exp(x)

    def grad(upstream):
        return upstream * (1 - 1 / (1 + e))

    return torch.log(1 + e), grad


def log1pexp_tf(x: Tensor) -> Tensor:
    return log1pexp(x)


# --- clipped_relu(x, 1.5): a Python float among the positional arguments ------------------------


def clipped_relu_native(x: Tensor, clip: float) -> Tensor:
    return x.clamp(min=0, max=clip)


class ClippedReluFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, clip: float) -> Tensor:
        ctx.save_for_backward(x)
        ctx.clip = clip
        return x.clamp(min=0, max=clip)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor, None]:
        (x,) = ctx.saved_tensors
        mask = ((x > 0) & (x < ctx.clip)).to(dy.dtype)
        return dy * mask, None


def clipped_relu_function(x: Tensor, clip: float) -> Tensor:
    return ClippedReluFunction.apply(x, clip)


@custom_gradient
def clipped_relu(x, clip):
    def grad(dy):
        mask = ((x > 0) & (x < clip)).to(dy.dtype)
        return dy * mask, None

    return x.clamp(min=0, max=clip), grad


def clipped_relu_tf(x: Tensor, clip: float) -> Tensor:
    return clipped_relu(x, clip)


# --- two inputs, two outputs: (a * b, a - b) ----------------------------------------------------


def mul_sub_native(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return a * b, a - b


class MulSubFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
        ctx.save_for_backward(a, b)
        return a * b, a - b

    @staticmethod
    def backward(ctx: Any, du: Tensor, dv: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return du * b + dv, du * a - dv


def mul_sub_function(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return MulSubFunction.apply(a, b)


@custom_gradient
def mul_sub(a, b):
    def grad(du, dv):
        return du * b + dv, du * a - dv

    return (a * b, a - b), grad


def mul_sub_tf(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    return mul_sub(a, b)


# --- sigmoid: grad_fn closes over its own output ------------------------------------------------


def sigmoid_native(x: Tensor) -> Tensor:
    return torch.sigmoid(x)


class SigmoidFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        y = torch.sigmoid(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> Tensor:
        (y,) = ctx.saved_tensors
        return dy * y * (1 - y)


def sigmoid_function(x: Tensor) -> Tensor:
    return SigmoidFunction.apply(x)


@custom_gradient
def sigmoid(x):
    y = torch.sigmoid(x)

    def grad(dy):
        return dy * y * (1 - y)

    return y, grad


def sigmoid_tf(x: Tensor) -> Tensor:
    return sigmoid(x)


# --- scaled(x, scale=1.5): a Python float by keyword ---------------------------------------------


def scaled_native(x: Tensor) -> Tensor:
    return x * 1.5


class ScaledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor, None]:
        return dy * ctx.scale, None


def scaled_function(x: Tensor) -> Tensor:
    return ScaledFunction.apply(x, 1.5)


@custom_gradient
def scaled(x, scale=1.0):
    def grad(dy):
        return dy * scale

    return x * scale, grad


def scaled_tf(x: Tensor) -> Tensor:
    return scaled(x, scale=1.5)


# --- two inputs, nested outputs {"p": a*b, "q": (a+b, a-b)} --------------------------------------


def nested_native(a: Tensor, b: Tensor) -> dict[str, Any]:
    return {"p": a * b, "q": (a + b, a - b)}


class NestedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        ctx.save_for_backward(a, b)
        return a * b, a + b, a - b

    @staticmethod
    def backward(ctx: Any, dp: Tensor, ds: Tensor, dd: Tensor) -> tuple[Tensor, Tensor]:
        a, b = ctx.saved_tensors
        return dp * b + ds + dd, dp * a + ds - dd


def nested_function(a: Tensor, b: Tensor) -> dict[str, Any]:
    p, s, d = NestedFunction.apply(a, b)
    return {"p": p, "q": (s, d)}


@custom_gradient
def nested(a, b):
    def grad(dp, ds, dd):
        return dp * b + ds + dd, dp * a + ds - dd

    return {"p": a * b, "q": (a + b, a - b)}, grad


def nested_tf(a: Tensor, b: Tensor) -> dict[str, Any]:
    return nested(a, b)


# --- linear layers of the MLP -------------------------------------------------------------------
# The hand-written backward computes every gradient, as grad_fn does, so both do the same math.


class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, w)
        return F.linear(x, w, b)

    @staticmethod
    def backward(ctx: Any, dy: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, w = ctx.saved_tensors
        return dy @ w, dy.t() @ x, dy.sum(0)


def make_closure_linear(w: torch.nn.Parameter, b: torch.nn.Parameter) -> Callable[[Tensor], Tensor]:
    """A layer that reads its Parameters from the closure: grad_fn gets them as `variables`."""

    @custom_gradient
    def linear(x):
        def grad_fn(dy, variables=None):
            return dy @ w, [dy.t() @ x, dy.sum(0)]

        return F.linear(x, w, b), grad_fn

    return linear


@custom_gradient
def linear_args(x, w, b):
    def grad_fn(dy):
        return dy @ w, dy.t() @ x, dy.sum(0)

    return F.linear(x, w, b), grad_fn


class MLP(torch.nn.Module):
    """`depth` linear layers of `width` features with ReLU between them, in one of four forms:
    native, Function, tf_compat_grad with closure Parameters, or with Parameters as arguments."""

    def __init__(self, form: str, width: int, depth: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.weights = torch.nn.ParameterList(
            torch.randn(width, width, generator=gen) / width**0.5 for _ in range(depth)
        )
        self.biases = torch.nn.ParameterList(torch.zeros(width) for _ in range(depth))
        pairs = list(zip(self.weights, self.biases, strict=True))
        layers: list[Callable[[Tensor], Tensor]]
        if form == "native":
            layers = [_bind(F.linear, w, b) for w, b in pairs]
        elif form == "function":
            layers = [_bind(LinearFunction.apply, w, b) for w, b in pairs]
        elif form == "closure":
            layers = [make_closure_linear(w, b) for w, b in pairs]
        elif form == "closure in forward":  # each call decorates a new layer function
            layers = [_bind(_closure_in_forward, w, b) for w, b in pairs]
        elif form == "args":
            layers = [_bind(linear_args, w, b) for w, b in pairs]
        else:
            raise ValueError(f"unknown MLP form {form!r}")
        self.layers = layers  # a plain list: the Parameters are registered above

    def forward(self, x: Tensor) -> Tensor:
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = torch.relu(x)
        return x


def _closure_in_forward(x: Tensor, w: torch.nn.Parameter, b: torch.nn.Parameter) -> Tensor:
    """The closure-Parameter layer as a `forward` that defines it: decorated on every call."""
    return make_closure_linear(w, b)(x)


def _bind(linear: Callable[..., Tensor], w: Tensor, b: Tensor) -> Callable[[Tensor], Tensor]:
    def layer(x: Tensor) -> Tensor:
        return linear(x, w, b)

    return layer


# --- what the harness drives --------------------------------------------------------------------


def _flat(out: Any) -> list[Tensor]:
    """The tensors of an op's outputs: a tensor, or tuples, lists and dicts of them."""
    if isinstance(out, Tensor):
        return [out]
    values = out.values() if isinstance(out, dict) else out
    return [t for value in values for t in _flat(value)]


class OpImpl:
    """One implementation of an op, with its own inputs (equal in value across implementations).

    `step` is forward, backward of the outputs against fixed upstream gradients, and resetting
    the inputs' `.grad` to None, as a training loop would between steps."""

    def __init__(self, fn: Callable[..., Any], make_args: Callable[[], tuple[Any, ...]]) -> None:
        self.fn = fn
        self.args = make_args()
        self.leaves = [a for a in self.args if isinstance(a, Tensor) and a.requires_grad]
        with torch.no_grad():
            self.upstream = [torch.ones_like(o) for o in _flat(fn(*self.args))]

    def step(self, fn: Callable[..., Any] | None = None) -> None:
        outs = _flat((fn or self.fn)(*self.args))
        torch.autograd.backward(outs, self.upstream)
        for t in self.leaves:
            t.grad = None

    def forward(self) -> Any:
        return self.fn(*self.args)

    def memory_forward(self) -> list[Tensor]:
        return _flat(self.fn(*self.args))

    def held(self) -> list[Tensor]:
        """Tensors the benchmark itself holds (not counted as kept alive by the graph)."""
        return [a for a in self.args if isinstance(a, Tensor)] + self.upstream

    def compiled_step(self, backend: Any) -> Callable[[], None]:
        compiled = torch.compile(self.fn, fullgraph=True, backend=backend)
        return lambda: self.step(compiled)

    def reset(self) -> None:
        for t in self.leaves:
            t.grad = None


class MLPImpl:
    """One MLP training step: zero_grad, forward, MSE, backward, SGD."""

    def __init__(self, form: str, width: int, depth: int, batch: int, seed: int) -> None:
        self.model = MLP(form, width, depth, seed)
        gen = torch.Generator().manual_seed(seed + 1)
        self.x = torch.randn(batch, width, generator=gen)
        self.target = torch.randn(batch, width, generator=gen)
        self.upstream = [torch.ones(batch, width)]
        self.leaves = list(self.model.parameters())
        self.opt = torch.optim.SGD(self.leaves, lr=1e-3)

    def loss(self, x: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(self.model(x), target)

    def step(self, loss: Callable[[Tensor, Tensor], Tensor] | None = None) -> None:
        self.opt.zero_grad()
        (loss or self.loss)(self.x, self.target).backward()
        self.opt.step()

    def forward(self) -> Tensor:
        return self.model(self.x)

    def memory_forward(self) -> list[Tensor]:
        return [self.model(self.x)]

    def held(self) -> list[Tensor]:
        return [self.x, self.target, *self.upstream, *self.leaves]

    def compiled_step(self, backend: Any) -> Callable[[], None]:
        compiled = torch.compile(self.loss, fullgraph=True, backend=backend)
        return lambda: self.step(compiled)

    def reset(self) -> None:
        self.opt.zero_grad()


Impl = OpImpl | MLPImpl


class Case:
    """One benchmarked op: a key, a two-line label, and a factory for its implementations."""

    def __init__(self, key: str, label: str, make: Callable[[str], Impl]) -> None:
        self.key = key
        self.label = label  # for the chart
        self.title = label.replace("\n", " ")  # for the tables
        self.make = make


def _vector(n: int, seed: int, low: float | None = None) -> Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, generator=gen) if low is None else torch.rand(n, generator=gen) + low
    return x.requires_grad_()


def _op_case(
    key: str, title: str, fns: dict[str, Callable[..., Any]], make_args: Callable[[], tuple]
) -> Case:
    return Case(key, title, lambda impl: OpImpl(fns[impl], make_args))


def _mlp_case(key: str, title: str, tf_form: str) -> Case:
    forms = {NATIVE: "native", FUNCTION: "function", TF: tf_form}
    return Case(key, title, lambda impl: MLPImpl(forms[impl], width=256, depth=3, batch=64, seed=0))


CASES = [
    _op_case(
        "log1pexp_n100",
        "log1pexp\nn=100",
        {NATIVE: log1pexp_native, FUNCTION: log1pexp_function, TF: log1pexp_tf},
        lambda: (_vector(100, 0),),
    ),
    _op_case(
        "log1pexp_n1e6",
        "log1pexp\nn=1e6",
        {NATIVE: log1pexp_native, FUNCTION: log1pexp_function, TF: log1pexp_tf},
        lambda: (_vector(1_000_000, 0),),
    ),
    _op_case(
        "clipped_relu",
        "clipped_relu(x, 1.5)\nn=100",
        {NATIVE: clipped_relu_native, FUNCTION: clipped_relu_function, TF: clipped_relu_tf},
        lambda: (_vector(100, 1), 1.5),
    ),
    _op_case(
        "two_in_two_out",
        "2 in, 2 out (a*b, a-b)\nn=100",
        {NATIVE: mul_sub_native, FUNCTION: mul_sub_function, TF: mul_sub_tf},
        lambda: (_vector(100, 2), _vector(100, 3)),
    ),
    _op_case(
        "own_output",
        "sigmoid, grad uses y\nn=100",
        {NATIVE: sigmoid_native, FUNCTION: sigmoid_function, TF: sigmoid_tf},
        lambda: (_vector(100, 4),),
    ),
    _op_case(
        "keyword",
        "scaled(x, scale=1.5)\nn=100",
        {NATIVE: scaled_native, FUNCTION: scaled_function, TF: scaled_tf},
        lambda: (_vector(100, 5),),
    ),
    _op_case(
        "nested_outputs",
        "2 in, {p: a*b, q: (a+b, a-b)}\nn=100",
        {NATIVE: nested_native, FUNCTION: nested_function, TF: nested_tf},
        lambda: (_vector(100, 6), _vector(100, 7)),
    ),
    _mlp_case("mlp_closure", "MLP train step\nclosure Parameters", "closure"),
    _mlp_case("mlp_args", "MLP train step\nParameters as args", "args"),
]

N100_CASES = ("log1pexp_n100", "clipped_relu", "two_in_two_out", "own_output", "keyword", "nested_outputs")  # fmt: skip

# The performance targets, by (case, metric); "compiled" applies to every case.
TARGETS: dict[tuple[str, str], float] = {
    ("log1pexp_n100", "fwd_bwd"): 1.12,
    ("log1pexp_n1e6", "fwd_bwd"): 1.02,
    ("mlp_closure", "fwd_bwd"): 1.05,
    ("mlp_args", "fwd_bwd"): 1.03,
    **{(key, "fwd_bwd"): 1.15 for key in N100_CASES if key != "log1pexp_n100"},
    **{(key, "no_grad_forward"): 1.05 for key in N100_CASES},
    **{(case.key, "compiled_fwd_bwd"): 1.02 for case in CASES},
    # Decorated in forward (a new decoration of the same code on every call) against decorated
    # once: `_redecorate.compare`.
    **{(key, "redecorated"): 1.3 for key in (*N100_CASES, "mlp_closure")},
}
