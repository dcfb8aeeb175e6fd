"""Property-based differential test of what f reaches outside its arguments (Note [lost
gradients]): random modules and functions whose output is `x * (sum of terms)`, the terms drawn
from closure tensors (leaves, computed from a leaf, computed from the input), a keyword tensor,
a global, a plain tensor attribute of `self`, a Parameter of `self`, the same Parameter behind
a parametrization, or a tensor put in its slot by `torch.func.functional_call`; each needing a
gradient or not; under eager autograd, `torch.func.grad` or `vmap(grad)` (per-sample).

grad_fn gives the true gradient of that formula with every term held constant, and `dy * x` for
each variable. The oracle: a call is refused exactly when a term that needs a gradient is
neither the input, a term computed from it, nor a tensor in a Parameter's place; otherwise
every gradient equals plain autograd of the same math without the decorator (where a term
computed from the input is held constant: grad_fn's rule replaces its gradient).

Hypothesis is derandomized, with no example database, so every run checks the same cases.
"""

import contextlib
import dataclasses

import pytest
import torch
from helpers import D, derandomized
from hypothesis import given
from hypothesis import strategies as st
from torch.func import functional_call, grad, vmap
from torch.nn.utils import parametrize

from tf_compat_grad import CustomGradientValueError, custom_gradient

pytestmark = pytest.mark.slow

SETTINGS = derandomized(150)
# What a term can be; `bound` ones are attributes of `self`, so they need a module.
UNBOUND_TERMS = ["closure_leaf", "closure_derived", "closure_from_input", "keyword", "global"]
BOUND_TERMS = ["attribute", "parameter", "parametrized", "slot"]
# A captured tensor needing a gradient whose gradient would be lost: refused.
LOSES = {"closure_leaf", "closure_derived", "keyword", "global", "attribute"}
GLOBAL_TERM = None  # the "global" term, set per case


class Double(torch.nn.Module):
    def forward(self, w):
        return w * 2


@dataclasses.dataclass(frozen=True)
class Case:
    terms: tuple[tuple[str, bool], ...]  # (kind, requires grad)
    x_needs: bool
    bound: bool
    mode: str  # "eager", "grad", "vmap_grad"
    residual: bool  # a captured tensor needing a gradient that only grad_fn uses

    def kinds(self):
        return {kind for kind, _ in self.terms}

    def refused(self):
        return any(kind in LOSES and needs for kind, needs in self.terms)


@st.composite
def cases(draw):
    mode = draw(st.sampled_from(["eager", "grad", "vmap_grad"]))
    bound = mode != "eager" or draw(st.booleans())
    available = UNBOUND_TERMS + (BOUND_TERMS if bound else [])
    if mode != "eager":  # the transform differentiates the slot's tensor and x
        available = ["slot", "global", "attribute"]
    kinds = draw(st.lists(st.sampled_from(available), unique=True, max_size=4))
    if mode != "eager" and "slot" not in kinds:
        kinds.append("slot")
    if "slot" in kinds and "parametrized" in kinds:
        kinds.remove("parametrized")  # functional_call replaces the Parameter itself
    terms = []
    for kind in kinds:
        if mode != "eager" and kind == "slot":
            needs = True  # what the transform differentiates
        elif mode != "eager" and kind == "attribute":
            needs = False  # an eager tensor under a transform: a constant of it
        else:
            needs = draw(st.booleans())
        terms.append((kind, needs))
    x_needs = True if mode != "eager" else draw(st.booleans())
    return Case(tuple(terms), x_needs, bound, mode, draw(st.booleans()))


class World:
    """One case's tensors and function, decorated or written as plain autograd; both draw the
    same values in the same order."""

    def __init__(self, case, decorated):
        self.case = case
        self.decorated = decorated
        gen = torch.Generator().manual_seed(7)
        self.value = lambda: torch.randn(3, dtype=D, generator=gen)
        self.leaves = {}  # the tensors whose gradients are compared, by name
        needs = dict(case.terms)
        self.x = self.leaf("x", case.x_needs)
        self.upstream = self.value()
        self.cells = {}
        if "closure_leaf" in needs:
            self.cells["c_leaf"] = self.leaf("closure_leaf", needs["closure_leaf"])
        if "closure_derived" in needs:
            self.cells["c_derived"] = self.leaf("closure_derived", needs["closure_derived"]) * 2
        if "closure_from_input" in needs:
            shifted = self.x + self.value()  # perturb_and_apply's `x + u`
            self.cells["c_input"] = shifted if decorated else shifted.detach()
        self.keyword = self.leaf("keyword", needs["keyword"]) if "keyword" in needs else None
        self.global_term = self.leaf("global", needs["global"]) if "global" in needs else None
        self.residual = self.leaf("residual", True) if case.residual else None
        self.slot = self.leaf("slot", needs["slot"]) if "slot" in needs else None
        self.f = self.make_f()
        self.module = self.make_module(needs) if case.bound else None

    def leaf(self, name, needs):
        tensor = self.value().requires_grad_(needs)
        self.leaves[name] = tensor
        return tensor

    def make_module(self, needs):
        world = self

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                if {"parameter", "parametrized", "slot"} & needs.keys():
                    kind = "parameter" if "parameter" in needs else "parametrized"
                    weight = world.leaf(kind, needs.get(kind, True))
                    self.weight = torch.nn.Parameter(weight.detach(), weight.requires_grad)
                    world.leaves[kind] = self.weight
                if "attribute" in needs:
                    self.attr = world.leaf("attribute", needs["attribute"])

            forward = world.f

        model = Model()
        if "parametrized" in needs:
            parametrize.register_parametrization(model, "weight", Double())
            self.leaves["parametrized"] = model.parametrizations.weight.original
        return model

    def make_f(self):
        case = self.case
        cells = self.cells
        c_leaf, c_derived, c_input = (cells.get(k) for k in ("c_leaf", "c_derived", "c_input"))
        residual = self.residual
        kinds = case.kinds()
        reads_weight = bool({"parameter", "parametrized", "slot"} & kinds)

        def f(self, x, k=None):
            total = torch.zeros(3, dtype=D)
            for term in (c_leaf, c_derived, c_input, k):
                if term is not None:
                    total = total + term
            if "global" in kinds:
                total = total + GLOBAL_TERM
            if self is not None and "attribute" in kinds:
                total = total + self.attr
            if self is not None and reads_weight:
                total = total + self.weight

            def grad_fn(dy, variables=None):
                gx = dy * total if residual is None else dy * total * (1 + 0 * residual)
                return gx if variables is None else (gx, [dy * x for _ in variables])

            return x * total, grad_fn

        if not self.decorated:
            return lambda self, x, k=None: f(self, x, k)[0]
        if case.bound:
            return custom_gradient(f)  # the module's forward
        return custom_gradient(lambda x, k=None: f(None, x, k))

    def output(self, x, slot=None):
        kwargs = {} if self.keyword is None else {"k": self.keyword}
        if self.module is None:
            return self.f(x, **kwargs) if self.decorated else self.f(None, x, **kwargs)
        if slot is not None:
            return functional_call(self.module, {"weight": slot}, (x,), kwargs)
        return self.module(x, **kwargs)

    def loss(self, slot, x):
        return (self.output(x, slot) * self.upstream).sum()

    def gradients(self):
        """The gradients of the loss: by leaf name (eager), or of (slot, x) under a transform."""
        global GLOBAL_TERM
        GLOBAL_TERM = self.global_term
        mode = self.case.mode
        if mode == "eager":
            loss = self.loss(self.slot, self.x)
            if loss.requires_grad:  # else no leaf needs a gradient
                loss.backward()
            return {name: t.grad for name, t in self.leaves.items() if t.requires_grad}

        def loss(slot, x, *captured):
            global GLOBAL_TERM
            if captured:  # a tensor of the transform's level that f reads: its gradient is lost
                GLOBAL_TERM = captured[0]
            return self.loss(slot, x)

        # A global that needs no gradient stays outside the transform: a captured tensor of the
        # transform's level that needs none is torch's internal error under vmap, not a loss.
        captured = () if self.global_term is None else (self.global_term.detach(),)
        argnums = (0, 1, 2) if dict(self.case.terms).get("global") else (0, 1)
        captured = captured if len(argnums) == 3 else ()
        if mode == "grad":
            transform = grad(loss, argnums=argnums)
            x = self.x.detach()
        else:
            transform = vmap(
                grad(loss, argnums=argnums), in_dims=(None, 0, *(None,) * len(captured))
            )
            x = torch.stack([self.x.detach(), 2 * self.x.detach()])
        names = ["slot", "x", "global"][: len(argnums)]
        return dict(zip(names, transform(self.slot.detach(), x, *captured), strict=True))


@SETTINGS
@given(cases())
def test_every_gradient_is_the_true_one_or_refused(case):
    reference = World(case, decorated=False).gradients()
    world = World(case, decorated=True)
    refused = case.refused()
    with (
        pytest.raises(CustomGradientValueError, match="would be lost")
        if refused
        else (contextlib.nullcontext())
    ):
        got = world.gradients()
    if refused:
        return
    assert got.keys() == reference.keys()
    for name, want in reference.items():
        if want is None:  # a leaf the math does not use
            assert got[name] is None, name
        else:
            assert got[name] is not None, f"{name}: no gradient"
            torch.testing.assert_close(got[name], want, msg=lambda m, name=name: f"{name}: {m}")
    assert parametrize._cache == {}
