"""The torch.func checks: `torch.func.grad` against backward, and `vmap` of the forward and of
grad against a loop over a batch (Note [statuses] in `runner.py`)."""

from __future__ import annotations

import torch

from .numerics import (
    BATCH,
    F64,
    FAIL,
    PASS,
    SKIP,
    WARN,
    _Diff,
    _dot,
    _first_line,
    _float_outputs,
    _fmt,
    _random_like,
    _Tensor,
    _vjp,
)
from .report import Row
from .subject import _forward_f64, _Inputs, _Subject


def _transform_skip(s: _Subject, check: str) -> Row | None:
    if not s.float_positions:
        return Row(
            check,
            SKIP,
            "no floating-point positional input (Parameters are constants of "
            "torch.func transforms)",
        )
    return None


def _check_func_grad(s: _Subject) -> Row:
    with s.cast(F64):
        inputs, outputs, upstreams = _forward_f64(s)
        eager = _vjp(outputs, upstreams, inputs.inputs)
        plain = [t.detach() for t in inputs.tensors]
        floats = tuple(i for i, p in enumerate(s.tensor_positions) if p in s.float_positions)

        def loss(*tensors: _Tensor) -> _Tensor:
            return _dot(_float_outputs(inputs.call_with(tensors)), upstreams)

        try:
            got = torch.func.grad(loss, argnums=floats)(*plain)
        except Exception as error:
            return Row("func_grad", WARN, f"torch.func.grad raises {_first_line(error)}")
    diff = _Diff(list(got), eager)
    figure = f"max |func.grad - backward| {_fmt(diff.max)}"
    if diff.differs():
        where = diff.largest(" at {where} ({got:.4g}, backward {want:.4g})", s.elements_of(eager))
        reason = f"torch.func.grad gives a different gradient{where}"
        return Row("func_grad", FAIL, reason, figure, diff.max)
    return Row("func_grad", PASS, "torch.func.grad gives the eager gradient", figure, diff.max)


def _check_vmap(s: _Subject) -> Row:
    with s.cast(F64):
        base = _Inputs(s, F64, grad=False)
        generator = torch.Generator().manual_seed(11)
        batched = []
        for t in base.tensors:
            if t.is_floating_point():
                noise = torch.randn((BATCH, *t.shape), generator=generator, dtype=F64)
                scale = torch.arange(BATCH, dtype=F64).reshape(BATCH, *([1] * t.dim())) * 0.05
                batched.append(t.unsqueeze(0) + (scale * noise).to(t.device, t.dtype))
            else:
                batched.append(t.unsqueeze(0).expand(BATCH, *t.shape).clone())
        samples = [[b[j] for b in batched] for j in range(BATCH)]

        def forward(*tensors: _Tensor) -> tuple[_Tensor, ...]:
            return tuple(_float_outputs(base.call_with(tensors)))

        reference = [forward(*sample) for sample in samples]
        stacked = [torch.stack(parts) for parts in zip(*reference, strict=True)]
        try:
            got = torch.func.vmap(forward)(*batched)
        except Exception as error:
            return Row("vmap", WARN, f"vmap of the forward raises {_first_line(error)}")
        diff = _Diff(list(got), stacked)
        if diff.differs():
            return Row(
                "vmap",
                FAIL,
                "vmap of the forward gives other outputs than a loop over the batch",
                f"max difference {_fmt(diff.max)}",
                diff.max,
            )
        upstreams = _random_like(list(reference[0]), 0)
        floats = tuple(i for i, p in enumerate(s.tensor_positions) if p in s.float_positions)

        def loss(*tensors: _Tensor) -> _Tensor:
            return _dot(forward(*tensors), upstreams)

        eager = []
        for sample in samples:
            leaves = [t.clone().requires_grad_(i in floats) for i, t in enumerate(sample)]
            eager.append(_vjp(list(forward(*leaves)), upstreams, [leaves[i] for i in floats]))
        expected = [torch.stack(parts) for parts in zip(*eager, strict=True)]
        try:
            per_sample = torch.func.vmap(torch.func.grad(loss, argnums=floats))(*batched)
        except Exception as error:
            mask = (
                ": grad_fn indexes with a boolean mask (`dx[x <= 0] = -0.5`), whose result "
                "has a data-dependent shape that vmap cannot batch; `torch.where(x <= 0, "
                "-0.5, dy)` computes the same and batches"
                if "boolean mask" in str(error)
                else ""
            )
            return Row(
                "vmap",
                WARN,
                f"the batched forward works, but per-sample gradients (vmap of "
                f"grad) raise {_first_line(error)}{mask}",
            )
    grad_diff = _Diff(list(per_sample), expected)
    figure = f"max difference {_fmt(max(diff.max, grad_diff.max))}"
    if grad_diff.differs():
        return Row(
            "vmap",
            FAIL,
            "per-sample gradients (vmap of grad) differ from a loop over the batch",
            figure,
            grad_diff.max,
        )
    return Row(
        "vmap",
        PASS,
        f"a batch of {BATCH}: outputs and per-sample gradients match a loop",
        figure,
        max(diff.max, grad_diff.max),
    )
