"""Finite differences of a scalar function of the inputs, per element or along random
directions, with one-sided differences where an element sits on a kink or jump (Note [kinks])."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from .numerics import DIRECTIONS, EPS, F64, KINK_RTOL, MAX_ELEMENTS, _random_like, _Tensor
from .subject import _Subject, _unravel

# --- finite differences -------------------------------------------------------------------


class _Numerical:
    """Finite differences of a scalar function of the targets, against its analytic gradient.

    Up to MAX_ELEMENTS elements, one derivative per element; beyond, the directional
    derivative along DIRECTIONS random directions (compared with `<analytic, direction>`).
    Elements where finite differences are no derivative are set apart (Note [kinks]).

    # Note [kinks]
    A central difference across a kink (relu at 0) or a jump (a piecewise gradient at its boundary,
    in the second-order check) is no derivative: relu's is 0.5 at 0, and a jump gives jump / (2
    EPS). So the one-sided differences are taken too, `(f(x+h) - f(x)) / h` and `(f(x) - f(x-h)) /
    h`, from the same evaluations plus one at x. On a smooth stretch they differ by about `h |f''|`,
    a millionth of the curvature; across a kink by the change of slope, across a jump by the jump
    over h. Where they differ by more than KINK_RTOL of the larger slope and of the analytic scale
    (at least 1), plus the rounding error, the element is on a kink: its value is not compared (a
    non-finite analytic value still is, NaN being wrong on either side), and the checks name it. A
    smooth element looks like a kink only where |f''| exceeds about 1000 times its slope and the
    analytic scale, so a wrong rule is still caught at every smooth element.
    """

    def __init__(
        self,
        evaluate: Callable[[], float],
        targets: Sequence[_Tensor],
        analytic: Sequence[_Tensor],
    ) -> None:
        self.per_element = sum(t.numel() for t in targets) <= MAX_ELEMENTS
        saved = [t.detach().clone() for t in targets]
        self.values = [t.to(F64).reshape(-1).cpu() for t in saved]
        try:
            at = evaluate()
            if self.per_element:
                self.shapes = [t.shape for t in targets]
                sides = [self._per_element(evaluate, t) for t in targets]
            else:
                self.directions = [_random_like(targets, 100 + d) for d in range(DIRECTIONS)]
                self.shapes = [torch.Size([DIRECTIONS])]
                sides = [
                    torch.tensor(
                        [self._along(evaluate, targets, saved, d) for d in self.directions],
                        dtype=F64,  # not the default float32, which rounds f to 1e-7
                    ).T
                ]
            self.analytic = self.project(analytic)
        finally:
            with torch.no_grad():
                for t, s in zip(targets, saved, strict=True):
                    t.copy_(s)
        finite = [a[torch.isfinite(a)].abs() for a in self.analytic]
        scale = max([1.0, *(float(a.max()) for a in finite if a.numel())])
        self.numerical, self.left, self.right, self.kinked = [], [], [], []
        for plus, minus in sides:
            right, left = (plus - at) / EPS, (at - minus) / EPS
            size = plus.abs().maximum(minus.abs()).clamp(min=abs(at))
            rounding = 4 * torch.finfo(F64).eps * size / EPS
            tolerance = KINK_RTOL * (right.abs().maximum(left.abs()) + scale) + rounding
            self.numerical.append((plus - minus) / (2 * EPS))
            self.left.append(left)
            self.right.append(right)
            self.kinked.append((right - left).abs() > tolerance)  # False where either is NaN

    @staticmethod
    def _per_element(evaluate: Callable[[], float], t: _Tensor) -> _Tensor:
        """f at `t` moved by +EPS and by -EPS, one element at a time: shape (2, t.numel())."""
        out = torch.zeros((2, t.numel()), dtype=F64)
        for k in range(t.numel()):
            index = _unravel(k, t.shape)
            with torch.no_grad():
                original = t[index].item()
            for row, step in enumerate((EPS, -EPS)):
                with torch.no_grad():
                    t[index] = original + step
                out[row, k] = evaluate()
            with torch.no_grad():
                t[index] = original
        return out

    @staticmethod
    def _along(
        evaluate: Callable[[], float],
        targets: Sequence[_Tensor],
        saved: Sequence[_Tensor],
        direction: Sequence[_Tensor],
    ) -> tuple[float, float]:
        values = []
        for sign in (1.0, -1.0):
            with torch.no_grad():
                for t, s, d in zip(targets, saved, direction, strict=True):
                    t.copy_(s + sign * EPS * d)
            values.append(evaluate())
        return values[0], values[1]

    def project(self, gradients: Sequence[_Tensor]) -> list[_Tensor]:
        """Gradients (one per target) as the finite differences see them: flattened per
        element, or their inner product with each random direction."""
        if self.per_element:
            return [g.detach().to(F64).reshape(-1).cpu() for g in gradients]
        return [
            torch.tensor(
                [
                    sum(
                        float((g.detach().to(F64) * v.to(F64)).sum())
                        for g, v in zip(gradients, d, strict=True)
                    )
                    for d in self.directions
                ],
                dtype=F64,
            )
        ]

    def compared(self) -> tuple[list[_Tensor], list[_Tensor]]:
        """The analytic and numerical values to compare: on a kink, the numerical value is
        replaced by the analytic one where that is finite (Note [kinks])."""
        numerical = [
            torch.where(kinked & torch.isfinite(a), a, n)
            for a, n, kinked in zip(self.analytic, self.numerical, self.kinked, strict=True)
        ]
        return self.analytic, numerical

    @property
    def unit(self) -> str:
        return "element(s)" if self.per_element else "random direction(s)"

    @property
    def on_kinks(self) -> int:
        return sum(int(k.sum()) for k in self.kinked)

    @property
    def compared_count(self) -> int:
        return sum(int(k.numel()) for k in self.kinked) - self.on_kinks

    def kinks(self, subject: _Subject) -> str:
        """The elements on a kink or jump, named with their values and one-sided differences;
        empty when there is none."""
        n = self.on_kinks
        if not n:
            return ""
        found = [(i, int(k)) for i, mask in enumerate(self.kinked) for k in mask.nonzero()]
        shown = []
        for i, k in found[:3]:
            value = f" = {float(self.values[i][k]):.4g}" if self.per_element else ""
            shown.append(
                f"{self.where(subject, i, k)}{value} (left {float(self.left[i][k]):.4g}, "
                f"right {float(self.right[i][k]):.4g})"
            )
        more = f" and {n - len(shown)} more" if n > len(shown) else ""
        total = sum(k.numel() for k in self.kinked)
        return (
            f"not checkable at {n} of {total} {self.unit} on a kink or jump, where the one-sided "
            f"differences disagree: {'; '.join(shown)}{more}"
        )

    def where(self, subject: _Subject, i: int, k: int) -> str:
        if self.per_element:
            return subject.element(i, k, self.shapes[i])
        return f"random direction {k}"
