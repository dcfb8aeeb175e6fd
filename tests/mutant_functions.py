"""Correct custom gradients and realistic mutants of them, for the checker's mutation score
(`tests/test_mutants.py`, docs/checker.md "Mutation score").

Each correct function is followed by its mutants: the same forward, and the grad_fn with one bug
of the kind people make when they write gradients by hand. `CORRECT` and `MUTANTS` list them;
the module is also a target of `python -m tf_compat_grad check`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from tf_compat_grad import custom_gradient

Grad = Callable[..., Any]
T = torch.Tensor


def _vector() -> tuple[T]:
    return (torch.randn(6),)


def _matrix() -> tuple[T]:
    return (torch.randn(3, 5),)


def _positive() -> tuple[T]:
    return (torch.rand(6) + 0.5,)


# --- log1pexp -----------------------------------------------------------------------------


@custom_gradient(example=_vector)
def log1pexp(x: T) -> tuple[T, Grad]:
    e = torch.exp(x)
    return torch.log1p(e), lambda dy: dy * (1 - 1 / (1 + e))


@custom_gradient(example=_vector)
def log1pexp_sign(x: T) -> tuple[T, Grad]:
    e = torch.exp(x)
    return torch.log1p(e), lambda dy: dy * (1 / (1 + e) - 1)


@custom_gradient(example=_vector)
def log1pexp_upstream_ignored(x: T) -> tuple[T, Grad]:
    e = torch.exp(x)
    return torch.log1p(e), lambda dy: 1 - 1 / (1 + e)


@custom_gradient(example=_vector)
def log1pexp_output_for_input(x: T) -> tuple[T, Grad]:
    y = torch.log1p(torch.exp(x))
    return y, lambda dy: dy * torch.sigmoid(y)


# --- softplus with a float argument -------------------------------------------------------


@custom_gradient(example=lambda: (torch.randn(6), 2.0))
def softplus(x: T, beta: float) -> tuple[T, Grad]:
    return torch.log1p(torch.exp(beta * x)) / beta, lambda dy: (dy * torch.sigmoid(beta * x), None)


@custom_gradient(example=lambda: (torch.randn(6), 2.0))
def softplus_extra_factor(x: T, beta: float) -> tuple[T, Grad]:
    y = torch.log1p(torch.exp(beta * x)) / beta
    return y, lambda dy: (dy * beta * torch.sigmoid(beta * x), None)


@custom_gradient(example=lambda: (torch.randn(6), 2.0))
def softplus_beta_left_out(x: T, beta: float) -> tuple[T, Grad]:
    return torch.log1p(torch.exp(beta * x)) / beta, lambda dy: (dy * torch.sigmoid(x), None)


# --- softmax ------------------------------------------------------------------------------


@custom_gradient(example=_matrix)
def softmax(x: T) -> tuple[T, Grad]:
    y = torch.softmax(x, -1)
    return y, lambda dy: y * (dy - (dy * y).sum(-1, keepdim=True))


@custom_gradient(example=_matrix)
def softmax_missing_term(x: T) -> tuple[T, Grad]:
    y = torch.softmax(x, -1)
    return y, lambda dy: y * dy


@custom_gradient(example=_matrix)
def softmax_wrong_axis(x: T) -> tuple[T, Grad]:
    y = torch.softmax(x, -1)
    return y, lambda dy: y * (dy - (dy * y).sum(0, keepdim=True))


@custom_gradient(example=_matrix)
def softmax_sign(x: T) -> tuple[T, Grad]:
    y = torch.softmax(x, -1)
    return y, lambda dy: y * (dy + (dy * y).sum(-1, keepdim=True))


# --- log-softmax --------------------------------------------------------------------------


@custom_gradient(example=_matrix)
def log_softmax(x: T) -> tuple[T, Grad]:
    y = torch.log_softmax(x, -1)
    return y, lambda dy: dy - torch.exp(y) * dy.sum(-1, keepdim=True)


@custom_gradient(example=_matrix)
def log_softmax_missing_term(x: T) -> tuple[T, Grad]:
    return torch.log_softmax(x, -1), lambda dy: dy


@custom_gradient(example=_matrix)
def log_softmax_log_probabilities_for_probabilities(x: T) -> tuple[T, Grad]:
    y = torch.log_softmax(x, -1)
    return y, lambda dy: dy - y * dy.sum(-1, keepdim=True)


@custom_gradient(example=_matrix)
def log_softmax_wrong_axis(x: T) -> tuple[T, Grad]:
    y = torch.log_softmax(x, -1)
    return y, lambda dy: dy - torch.exp(y) * dy.sum(0, keepdim=True)


# --- logsumexp ----------------------------------------------------------------------------


@custom_gradient(example=_matrix)
def logsumexp(x: T) -> tuple[T, Grad]:
    return torch.logsumexp(x, -1), lambda dy: dy.unsqueeze(-1) * torch.softmax(x, -1)


@custom_gradient(example=_matrix)
def logsumexp_not_normalised(x: T) -> tuple[T, Grad]:
    return torch.logsumexp(x, -1), lambda dy: dy.unsqueeze(-1) * torch.exp(x)


@custom_gradient(example=_matrix)
def logsumexp_wrong_axis(x: T) -> tuple[T, Grad]:
    return torch.logsumexp(x, -1), lambda dy: dy.unsqueeze(-1) * torch.softmax(x, 0)


@custom_gradient(example=_matrix)
def logsumexp_upstream_ignored(x: T) -> tuple[T, Grad]:
    return torch.logsumexp(x, -1), lambda dy: torch.softmax(x, -1)


# --- safe norm ----------------------------------------------------------------------------


@custom_gradient(example=_vector)
def safe_norm(x: T) -> tuple[T, Grad]:
    n = torch.sqrt((x * x).sum() + 1e-12)
    return n, lambda dy: dy * x / n


@custom_gradient(example=_vector)
def safe_norm_extra_factor(x: T) -> tuple[T, Grad]:
    n = torch.sqrt((x * x).sum() + 1e-12)
    return n, lambda dy: dy * 2 * x / n


@custom_gradient(example=_vector)
def safe_norm_not_divided(x: T) -> tuple[T, Grad]:
    return torch.sqrt((x * x).sum() + 1e-12), lambda dy: dy * x


@custom_gradient(example=_vector)
def safe_norm_squared_denominator(x: T) -> tuple[T, Grad]:
    n = torch.sqrt((x * x).sum() + 1e-12)
    return n, lambda dy: dy * x / n**2


# --- normalisation to unit norm -----------------------------------------------------------


@custom_gradient(example=_vector)
def normalize(x: T) -> tuple[T, Grad]:
    n = torch.linalg.vector_norm(x)
    y = x / n
    return y, lambda dy: (dy - y * (dy * y).sum()) / n


@custom_gradient(example=_vector)
def normalize_missing_term(x: T) -> tuple[T, Grad]:
    n = torch.linalg.vector_norm(x)
    return x / n, lambda dy: dy / n


@custom_gradient(example=_vector)
def normalize_input_for_output(x: T) -> tuple[T, Grad]:
    n = torch.linalg.vector_norm(x)
    return x / n, lambda dy: (dy - x * (dy * x).sum()) / n


@custom_gradient(example=_vector)
def normalize_sign(x: T) -> tuple[T, Grad]:
    n = torch.linalg.vector_norm(x)
    y = x / n
    return y, lambda dy: (dy + y * (dy * y).sum()) / n


# --- standardisation (layer norm without affine) ------------------------------------------


@custom_gradient(example=_matrix)
def standardize(x: T) -> tuple[T, Grad]:
    mean = x.mean(-1, keepdim=True)
    std = torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    y = (x - mean) / std

    def grad(dy: T) -> T:
        return (dy - dy.mean(-1, keepdim=True) - y * (dy * y).mean(-1, keepdim=True)) / std

    return y, grad


@custom_gradient(example=_matrix)
def standardize_missing_mean_term(x: T) -> tuple[T, Grad]:
    mean = x.mean(-1, keepdim=True)
    std = torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    y = (x - mean) / std
    return y, lambda dy: (dy - y * (dy * y).mean(-1, keepdim=True)) / std


@custom_gradient(example=_matrix)
def standardize_missing_variance_term(x: T) -> tuple[T, Grad]:
    mean = x.mean(-1, keepdim=True)
    std = torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
    return (x - mean) / std, lambda dy: (dy - dy.mean(-1, keepdim=True)) / std


# --- a linear layer -----------------------------------------------------------------------


def _linear_example() -> tuple[T, T, T]:
    return torch.randn(4, 3), torch.randn(3, 3), torch.randn(3)


@custom_gradient(example=_linear_example)
def linear(x: T, w: T, b: T) -> tuple[T, Grad]:
    return x @ w.T + b, lambda dy: (dy @ w, dy.T @ x, dy.sum(0))


@custom_gradient(example=_linear_example)
def linear_transposed_weight(x: T, w: T, b: T) -> tuple[T, Grad]:
    return x @ w.T + b, lambda dy: (dy @ w.T, dy.T @ x, dy.sum(0))


@custom_gradient(example=_linear_example)
def linear_transposed_weight_gradient(x: T, w: T, b: T) -> tuple[T, Grad]:
    return x @ w.T + b, lambda dy: (dy @ w, x.T @ dy, dy.sum(0))


@custom_gradient(example=_linear_example)
def linear_bias_mean(x: T, w: T, b: T) -> tuple[T, Grad]:
    return x @ w.T + b, lambda dy: (dy @ w, dy.T @ x, dy.mean(0))


# --- a bilinear form ----------------------------------------------------------------------


def _bilinear_example() -> tuple[T, T, T]:
    return torch.randn(4, 3), torch.randn(3, 3), torch.randn(4, 3)


@custom_gradient(example=_bilinear_example)
def bilinear(x: T, a: T, y: T) -> tuple[T, Grad]:
    out = ((x @ a) * y).sum(-1)

    def grad(dy: T) -> tuple[T, T, T]:
        d = dy.unsqueeze(-1)
        return d * (y @ a.T), (d * x).T @ y, d * (x @ a)

    return out, grad


@custom_gradient(example=_bilinear_example)
def bilinear_inputs_swapped(x: T, a: T, y: T) -> tuple[T, Grad]:
    out = ((x @ a) * y).sum(-1)

    def grad(dy: T) -> tuple[T, T, T]:
        d = dy.unsqueeze(-1)
        return d * (x @ a), (d * x).T @ y, d * (y @ a.T)

    return out, grad


@custom_gradient(example=_bilinear_example)
def bilinear_untransposed(x: T, a: T, y: T) -> tuple[T, Grad]:
    out = ((x @ a) * y).sum(-1)

    def grad(dy: T) -> tuple[T, T, T]:
        d = dy.unsqueeze(-1)
        return d * (y @ a), (d * x).T @ y, d * (x @ a)

    return out, grad


# --- a product of two inputs --------------------------------------------------------------


def _pair() -> tuple[T, T]:
    return torch.randn(5), torch.randn(5)


@custom_gradient(example=_pair)
def multiply(x: T, y: T) -> tuple[T, Grad]:
    return x * y, lambda dy: (dy * y, dy * x)


@custom_gradient(example=_pair)
def multiply_gradients_swapped(x: T, y: T) -> tuple[T, Grad]:
    return x * y, lambda dy: (dy * x, dy * y)


@custom_gradient(example=_pair)
def multiply_one_gradient_missing(x: T, y: T) -> tuple[T, Grad]:
    return x * y, lambda dy: (dy * y, None)


# --- two outputs --------------------------------------------------------------------------


@custom_gradient(example=_vector)
def sin_cos(x: T) -> tuple[tuple[T, T], Grad]:
    return (torch.sin(x), torch.cos(x)), lambda ds, dc: ds * torch.cos(x) - dc * torch.sin(x)


@custom_gradient(example=_vector)
def sin_cos_sign(x: T) -> tuple[tuple[T, T], Grad]:
    return (torch.sin(x), torch.cos(x)), lambda ds, dc: ds * torch.cos(x) + dc * torch.sin(x)


@custom_gradient(example=_vector)
def sin_cos_second_output_ignored(x: T) -> tuple[tuple[T, T], Grad]:
    return (torch.sin(x), torch.cos(x)), lambda ds, dc: ds * torch.cos(x)


@custom_gradient(example=_vector)
def sin_cos_upstreams_swapped(x: T) -> tuple[tuple[T, T], Grad]:
    return (torch.sin(x), torch.cos(x)), lambda ds, dc: dc * torch.cos(x) - ds * torch.sin(x)


# --- gelu (tanh approximation) ------------------------------------------------------------

_K = math.sqrt(2 / math.pi)


@custom_gradient(example=_vector)
def gelu(x: T) -> tuple[T, Grad]:
    t = torch.tanh(_K * (x + 0.044715 * x**3))
    inner = _K * (1 + 3 * 0.044715 * x**2)
    return 0.5 * x * (1 + t), lambda dy: dy * (0.5 * (1 + t) + 0.5 * x * (1 - t**2) * inner)


@custom_gradient(example=_vector)
def gelu_missing_term(x: T) -> tuple[T, Grad]:
    t = torch.tanh(_K * (x + 0.044715 * x**3))
    return 0.5 * x * (1 + t), lambda dy: dy * 0.5 * (1 + t)


@custom_gradient(example=_vector)
def gelu_chain_rule_factor_left_out(x: T) -> tuple[T, Grad]:
    t = torch.tanh(_K * (x + 0.044715 * x**3))
    return 0.5 * x * (1 + t), lambda dy: dy * (0.5 * (1 + t) + 0.5 * x * (1 - t**2) * _K)


@custom_gradient(example=_vector)
def gelu_wrong_constant(x: T) -> tuple[T, Grad]:
    k = math.sqrt(2 * math.pi)  # should be sqrt(2 / pi)
    t = torch.tanh(_K * (x + 0.044715 * x**3))
    inner = k * (1 + 3 * 0.044715 * x**2)
    return 0.5 * x * (1 + t), lambda dy: dy * (0.5 * (1 + t) + 0.5 * x * (1 - t**2) * inner)


# --- a reduction --------------------------------------------------------------------------


@custom_gradient(example=_matrix)
def row_mean(x: T) -> tuple[T, Grad]:
    n = x.shape[1]
    return x.mean(1), lambda dy: dy.unsqueeze(1).expand(-1, n) / n


@custom_gradient(example=_matrix)
def row_mean_not_divided(x: T) -> tuple[T, Grad]:
    n = x.shape[1]
    return x.mean(1), lambda dy: dy.unsqueeze(1).expand(-1, n)


@custom_gradient(example=_matrix)
def row_mean_wrong_count(x: T) -> tuple[T, Grad]:
    n, m = x.shape
    return x.mean(1), lambda dy: dy.unsqueeze(1).expand(-1, m) / n


# --- cross-entropy with soft targets ------------------------------------------------------


def _cross_entropy_example() -> tuple[T, T]:
    return torch.randn(3, 4), torch.rand(3, 4)


@custom_gradient(example=_cross_entropy_example)
def cross_entropy(logits: T, target: T) -> tuple[T, Grad]:
    logp = torch.log_softmax(logits, -1)

    def grad(dy: T) -> tuple[T, T]:
        d = dy.unsqueeze(-1)
        return d * (torch.exp(logp) * target.sum(-1, keepdim=True) - target), -d * logp

    return -(target * logp).sum(-1), grad


@custom_gradient(example=_cross_entropy_example)
def cross_entropy_sign(logits: T, target: T) -> tuple[T, Grad]:
    logp = torch.log_softmax(logits, -1)

    def grad(dy: T) -> tuple[T, T]:
        d = dy.unsqueeze(-1)
        return d * (target - torch.exp(logp) * target.sum(-1, keepdim=True)), -d * logp

    return -(target * logp).sum(-1), grad


@custom_gradient(example=_cross_entropy_example)
def cross_entropy_assumes_normalised_targets(logits: T, target: T) -> tuple[T, Grad]:
    logp = torch.log_softmax(logits, -1)

    def grad(dy: T) -> tuple[T, T]:
        d = dy.unsqueeze(-1)
        return d * (torch.exp(logp) - target), -d * logp

    return -(target * logp).sum(-1), grad


@custom_gradient(example=_cross_entropy_example)
def cross_entropy_no_target_gradient(logits: T, target: T) -> tuple[T, Grad]:
    logp = torch.log_softmax(logits, -1)

    def grad(dy: T) -> tuple[T, None]:
        d = dy.unsqueeze(-1)
        return d * (torch.exp(logp) * target.sum(-1, keepdim=True) - target), None

    return -(target * logp).sum(-1), grad


# --- sigmoid, from its output -------------------------------------------------------------


@custom_gradient(example=_vector)
def sigmoid(x: T) -> tuple[T, Grad]:
    y = torch.sigmoid(x)
    return y, lambda dy: dy * y * (1 - y)


@custom_gradient(example=_vector)
def sigmoid_input_for_output(x: T) -> tuple[T, Grad]:
    return torch.sigmoid(x), lambda dy: dy * x * (1 - x)


@custom_gradient(example=_vector)
def sigmoid_missing_factor(x: T) -> tuple[T, Grad]:
    y = torch.sigmoid(x)
    return y, lambda dy: dy * y


# --- a power with a float exponent --------------------------------------------------------


@custom_gradient(example=lambda: (torch.rand(6) + 0.5, 2.5))
def power(x: T, p: float) -> tuple[T, Grad]:
    return x**p, lambda dy: (dy * p * x ** (p - 1), None)


@custom_gradient(example=lambda: (torch.rand(6) + 0.5, 2.5))
def power_exponent_not_lowered(x: T, p: float) -> tuple[T, Grad]:
    return x**p, lambda dy: (dy * p * x**p, None)


@custom_gradient(example=lambda: (torch.rand(6) + 0.5, 2.5))
def power_missing_factor(x: T, p: float) -> tuple[T, Grad]:
    return x**p, lambda dy: (dy * x ** (p - 1), None)


# --- a matrix product ---------------------------------------------------------------------


def _square_pair() -> tuple[T, T]:
    return torch.randn(3, 3), torch.randn(3, 3)


@custom_gradient(example=_square_pair)
def matmul(a: T, b: T) -> tuple[T, Grad]:
    return a @ b, lambda dy: (dy @ b.T, a.T @ dy)


@custom_gradient(example=_square_pair)
def matmul_untransposed(a: T, b: T) -> tuple[T, Grad]:
    return a @ b, lambda dy: (dy @ b, a.T @ dy)


@custom_gradient(example=_square_pair)
def matmul_wrong_order(a: T, b: T) -> tuple[T, Grad]:
    return a @ b, lambda dy: (dy @ b.T, dy @ a.T)


@custom_gradient(example=_square_pair)
def matmul_gradients_swapped(a: T, b: T) -> tuple[T, Grad]:
    return a @ b, lambda dy: (a.T @ dy, dy @ b.T)


# --- swish --------------------------------------------------------------------------------


@custom_gradient(example=_vector)
def swish(x: T) -> tuple[T, Grad]:
    s = torch.sigmoid(x)
    return x * s, lambda dy: dy * (s + x * s * (1 - s))


@custom_gradient(example=_vector)
def swish_product_rule_half(x: T) -> tuple[T, Grad]:
    s = torch.sigmoid(x)
    return x * s, lambda dy: dy * x * s * (1 - s)


# --- a smooth L1 (Huber) loss with a float threshold --------------------------------------


@custom_gradient(example=lambda: (2 * torch.randn(8), 1.5))
def smooth_l1(x: T, delta: float) -> tuple[T, Grad]:
    small = x.abs() < delta
    y = torch.where(small, 0.5 * x**2 / delta, x.abs() - 0.5 * delta)
    return y, lambda dy: (dy * torch.where(small, x / delta, torch.sign(x)), None)


@custom_gradient(example=lambda: (2 * torch.randn(8), 1.5))
def smooth_l1_sign_everywhere(x: T, delta: float) -> tuple[T, Grad]:
    small = x.abs() < delta
    y = torch.where(small, 0.5 * x**2 / delta, x.abs() - 0.5 * delta)
    return y, lambda dy: (dy * torch.sign(x), None)


@custom_gradient(example=lambda: (2 * torch.randn(8), 1.5))
def smooth_l1_threshold_left_out(x: T, delta: float) -> tuple[T, Grad]:
    small = x.abs() < delta
    y = torch.where(small, 0.5 * x**2 / delta, x.abs() - 0.5 * delta)
    return y, lambda dy: (dy * torch.where(small, x, torch.sign(x)), None)


# --- the lists ----------------------------------------------------------------------------

CORRECT = [
    log1pexp,
    softplus,
    softmax,
    log_softmax,
    logsumexp,
    safe_norm,
    normalize,
    standardize,
    linear,
    bilinear,
    multiply,
    sin_cos,
    gelu,
    row_mean,
    cross_entropy,
    sigmoid,
    power,
    matmul,
    swish,
    smooth_l1,
]

# Each mutant, and the kind of bug it carries.
MUTANTS = {
    log1pexp_sign: "sign",
    log1pexp_upstream_ignored: "upstream not multiplied",
    log1pexp_output_for_input: "output used for input",
    softplus_extra_factor: "wrong factor",
    softplus_beta_left_out: "missing factor",
    softmax_missing_term: "missing term",
    softmax_wrong_axis: "wrong axis",
    softmax_sign: "sign",
    log_softmax_missing_term: "missing term",
    log_softmax_log_probabilities_for_probabilities: "output used for input",
    log_softmax_wrong_axis: "wrong axis",
    logsumexp_not_normalised: "missing term",
    logsumexp_wrong_axis: "wrong axis",
    logsumexp_upstream_ignored: "upstream not multiplied",
    safe_norm_extra_factor: "wrong constant",
    safe_norm_not_divided: "missing factor",
    safe_norm_squared_denominator: "wrong power",
    normalize_missing_term: "missing term",
    normalize_input_for_output: "input used for output",
    normalize_sign: "sign",
    standardize_missing_mean_term: "missing term",
    standardize_missing_variance_term: "missing term",
    linear_transposed_weight: "transposed matrix",
    linear_transposed_weight_gradient: "transposed matrix",
    linear_bias_mean: "wrong reduction",
    bilinear_inputs_swapped: "gradients of two inputs swapped",
    bilinear_untransposed: "transposed matrix",
    multiply_gradients_swapped: "gradients of two inputs swapped",
    multiply_one_gradient_missing: "missing gradient",
    sin_cos_sign: "sign",
    sin_cos_second_output_ignored: "upstream not multiplied",
    sin_cos_upstreams_swapped: "upstreams swapped",
    gelu_missing_term: "missing term",
    gelu_chain_rule_factor_left_out: "missing factor",
    gelu_wrong_constant: "wrong constant",
    row_mean_not_divided: "missing factor",
    row_mean_wrong_count: "wrong axis",
    cross_entropy_sign: "sign",
    cross_entropy_assumes_normalised_targets: "missing factor",
    cross_entropy_no_target_gradient: "missing gradient",
    sigmoid_input_for_output: "input used for output",
    sigmoid_missing_factor: "missing factor",
    power_exponent_not_lowered: "wrong power",
    power_missing_factor: "missing factor",
    matmul_untransposed: "transposed matrix",
    matmul_wrong_order: "transposed matrix",
    matmul_gradients_swapped: "gradients of two inputs swapped",
    swish_product_rule_half: "missing term",
    smooth_l1_sign_everywhere: "missing case",
    smooth_l1_threshold_left_out: "missing factor",
}
