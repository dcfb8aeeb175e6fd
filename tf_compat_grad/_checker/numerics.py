"""Numerical helpers of the checker: vector-Jacobian products, seeded random tensors,
comparisons with tolerances (`_Diff`), and formatting. Finite differences are in
`finite_differences.py`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from .. import _structure
from .report import Status

_Tensor = torch.Tensor
F64 = torch.float64

PASS, WARN, FAIL, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.SKIP

EPS = 1e-6  # central finite differences in float64
MAX_ELEMENTS = 64  # more input elements than this: finite differences along random directions
DIRECTIONS = 12
BATCH = 3  # vmap batch size
KINK_RTOL = 1e-3  # one-sided differences further apart: a kink or jump (Note [kinks])
SEED_OFFSET = 1009  # the random draws of the checks, apart from the example's (`_random_like`)
LINEAR_A, LINEAR_B = 2.0, -0.5  # a + b != 1, so a grad_fn that sets constants shows up


# --- small helpers ------------------------------------------------------------------------


def _float_outputs(out: Any) -> list[_Tensor]:
    return [o for o in _structure.leaves(out) if isinstance(o, _Tensor) and o.is_floating_point()]


def _random_like(tensors: Sequence[_Tensor], seed: int) -> list[_Tensor]:
    """Normal draws of each tensor's shape, device and dtype, the same for a seed whatever the
    dtype (drawn in float64): upstream gradients for outputs, directions and weights for
    inputs. Not from seed `seed` itself: example inputs are drawn from seed 0, and an upstream
    equal to an input (`dy == x`) hides a transposed gradient (`x.T @ dy == dy.T @ x`)."""
    generator = torch.Generator().manual_seed(SEED_OFFSET + seed)
    return [
        torch.randn(t.shape, generator=generator, dtype=F64).to(device=t.device, dtype=t.dtype)
        for t in tensors
    ]


def _vjp(
    outputs: Sequence[_Tensor],
    upstreams: Sequence[_Tensor],
    targets: Sequence[_Tensor],
    *,
    create_graph: bool = False,
    retain_graph: bool | None = None,
    materialize: bool = True,
) -> list[_Tensor]:
    """The gradient of `sum <output, upstream>` for each target; zeros where none flows (None,
    unless `materialize`, where some output requires grad)."""
    pairs = [(o, u) for o, u in zip(outputs, upstreams, strict=True) if o.requires_grad]
    if not pairs or not targets:
        return [torch.zeros_like(t) for t in targets]
    grads = torch.autograd.grad(
        [o for o, _ in pairs],
        list(targets),
        [u for _, u in pairs],
        allow_unused=True,
        materialize_grads=materialize,
        create_graph=create_graph,
        retain_graph=retain_graph,
    )
    return list(grads)


def _dot(outputs: Sequence[_Tensor], upstreams: Sequence[_Tensor]) -> _Tensor:
    total = torch.zeros((), dtype=F64)
    for o, u in zip(outputs, upstreams, strict=True):
        total = total + (o.to(F64) * u.to(F64)).sum()
    return total


class _Diff:
    """The largest difference between two lists of tensors, where both are finite; and where
    one is finite and the other is not."""

    def __init__(self, got: Sequence[_Tensor], want: Sequence[_Tensor]) -> None:
        self.max = 0.0
        self.scale = 0.0
        self.at: tuple[int, int] | None = None
        self.got_value = self.want_value = 0.0
        self.count = 0  # elements beyond the tolerance, set by `within`
        self.bad_got: tuple[int, int, float, float] | None = None  # non-finite got, finite want
        self.n_bad_got = 0
        self.n_bad_want = 0  # non-finite want, finite got
        self._pairs = [
            (g.detach().to(F64).reshape(-1), w.detach().to(F64).reshape(-1))
            for g, w in zip(got, want, strict=True)
        ]
        for i, (g, w) in enumerate(self._pairs):
            fg, fw = torch.isfinite(g), torch.isfinite(w)
            bad = fw & ~fg
            if bad.any():
                self.n_bad_got += int(bad.sum())
                if self.bad_got is None:
                    k = int(bad.nonzero()[0])
                    self.bad_got = (i, k, float(g[k]), float(w[k]))
            self.n_bad_want += int((fg & ~fw).sum())
            both = fg & fw
            if both.any():
                self.scale = max(self.scale, float(w[both].abs().max()))
                d = torch.where(both, (g - w).abs(), torch.zeros_like(g))
                k = int(d.argmax())
                if self.at is None or float(d[k]) > self.max:
                    self.max, self.at = float(d[k]), (i, k)
                    self.got_value, self.want_value = float(g[k]), float(w[k])

    def within(self, rtol: float, atol: float) -> bool:
        tol = atol + rtol * self.scale
        self.count = sum(
            int(((g - w).abs() > tol)[torch.isfinite(g) & torch.isfinite(w)].sum())
            for g, w in self._pairs
        )
        return self.max <= tol

    def differs(self, rtol: float = 1e-9, atol: float = 1e-12) -> bool:
        """NaN or infinity on one side only, or values outside the tolerance."""
        return bool(self.n_bad_got or self.n_bad_want) or not self.within(rtol, atol)

    @property
    def relative(self) -> float:
        return self.max / max(1.0, self.scale)

    def nonfinite(self, reason: str, where: Callable[[int, int], str]) -> str | None:
        """`reason` filled in for the first element where `got` is NaN or infinite and `want` is
        finite: `{got}`, `{want}`, `{where}` (the element, as `where(i, k)` names it) and `{n}`
        (how many such elements there are); None where there is none. The checks FAIL on it."""
        if self.bad_got is None:
            return None
        i, k, got, want = self.bad_got
        return reason.format(got=got, want=want, where=where(i, k), n=self.n_bad_got)

    def largest(self, text: str, where: Callable[[int, int], str]) -> str:
        """`text` filled in for the largest difference: `{where}` (the element, as `where(i, k)`
        names it), `{got}` and `{want}`; empty where no element was compared."""
        if self.at is None:
            return ""
        return text.format(where=where(*self.at), got=self.got_value, want=self.want_value)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    if len(message) > 300:
        message = message[:297] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def _fmt(value: float) -> str:
    return f"{value:.2g}" if value != 0 else "0"


def _apart(got: float, want: float) -> tuple[str, str]:
    """Two values a row compares, to 4 significant digits or as many more as tell them apart:
    a gradient wrong by a relative 1e-4 must not read as two equal numbers."""
    for digits in range(4, 18):
        shown = f"{got:.{digits}g}", f"{want:.{digits}g}"
        if shown[0] != shown[1] or got == want:
            break
    return shown


def _bytes(n: int) -> str:
    return f"{n} bytes" if n < 10_000 else f"{n / 1e6:.1f} MB"


@contextlib.contextmanager
def _seeded(seed: int = 0) -> Iterator[None]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def _quiet_compiler_logs() -> Iterator[None]:
    """Dynamo logs graph breaks as warnings on stderr; the compile check reports them."""
    loggers = [logging.getLogger(name) for name in ("torch._dynamo", "torch._inductor", "torch.fx")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
