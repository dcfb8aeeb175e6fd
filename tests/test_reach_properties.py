"""Property-based differential test of what decides "which Parameters does f read" (the reach
proof, Note [watching only when needed] and Note [Parameters of f's own] in `_reach.py`)
against what the watcher sees f read (Note [the Parameter watcher] in `_watcher.py`).

Random functions of one tensor x return a sum of terms, each a way to reach a tensor: the
argument, a closure cell, a global, an attribute of a user module, a helper function that reads
one of those, an item of a list, tuple or dict, a branch on x's values, a metadata-only read
(`t.shape`), a `functools.wraps` wrapper that says it is torch's, or a torch op of any of these;
each reached tensor is a Parameter or a plain tensor. The oracle: when the proof says "none",
the watcher sees no Parameter; when it says "own", every Parameter the watcher sees is one that
f's own closure cells or globals hold (what the plan relies on to skip the lost-gradient walk);
and the decorator's reach answers as the proof does.

Hypothesis is derandomized, with no example database, so every run checks the same cases.
"""

import functools
import types

import pytest
import torch
from helpers import derandomized
from hypothesis import given
from hypothesis import strategies as st

from tf_compat_grad._reach import ParameterReach, prove
from tf_compat_grad._reach_check import never
from tf_compat_grad._watcher import ParameterWatcher

pytestmark = pytest.mark.slow

SETTINGS = derandomized(300)

# Where a tensor is reached from (the innermost part of a term).
PLACES = ["cell", "global", "module", "list", "tuple", "dict", "default"]
# How a term reaches it: directly, or through a helper, a branch, metadata, a wrapper, an op.
FORMS = ["plain", "helper", "helper_closure", "branch", "metadata", "wrapper", "op", "method"]

places = st.tuples(st.sampled_from(PLACES), st.booleans())  # (place, holds a Parameter)
terms = st.tuples(st.sampled_from(FORMS), places)


class Built:
    """A generated f and the Parameters its own closure cells and globals hold."""

    def __init__(self, spec, positive):
        self.module = types.ModuleType("user_weights")  # a user module, not torch's
        self.namespace = {"torch": torch, "weights": self.module, "__name__": "user_code"}
        self.cells = {}
        self.own = []  # Parameters held directly by f's own cells and globals
        self.parameters = []
        self.lines = []  # helper definitions at module level
        parts = [self.term(k, form, place) for k, (form, place) in enumerate(spec)]
        body = " + ".join(["x", *parts])
        cells = ", ".join(self.cells)
        source = "\n".join(
            [
                *self.lines,
                f"def outer({cells}):",
                "    def f(x):",
                f"        {'; '.join(f'{c}' for c in self.cells) or 'pass'}",
                f"        return {body}",
                "    return f",
            ]
        )
        exec(compile(source, "<generated>", "exec"), self.namespace)
        self.f = self.namespace["outer"](*self.cells.values())
        self.x = torch.full((3,), 1.0 if positive else -1.0)

    def tensor(self, is_parameter):
        t = torch.randn(3)
        if is_parameter:
            t = torch.nn.Parameter(t)
            self.parameters.append(t)
        return t

    def reach(self, k, place, direct):
        """An expression for a tensor in `place`; `direct`: in f's own cells and globals."""
        where, is_parameter = place
        t = self.tensor(is_parameter)
        name = f"t{k}"
        if where == "cell":
            self.cells[name] = t
        elif where == "global":
            self.namespace[name] = t
        elif where == "module":
            setattr(self.module, name, t)
            return f"weights.{name}"
        elif where == "default":
            self.namespace[f"h_default{k}"] = t
            self.lines.append(f"def get{k}(v=h_default{k}):\n    return v")
            return f"get{k}()"
        else:
            holder = {"list": [t], "tuple": (t,), "dict": {"k": t}}[where]
            self.namespace[name] = holder
            return f"{name}[{'0' if where != 'dict' else repr('k')}]"
        if direct and is_parameter:
            self.own.append(t)
        return name

    def term(self, k, form, place):
        if form == "helper":  # a helper function reads it from its globals or a module
            where = "global" if place[0] == "cell" else place[0]  # no cell at module level
            inner = self.reach(k, (where, place[1]), False)
            self.lines.append(f"def helper{k}(x):\n    return x * {inner}")
            return f"helper{k}(x)"
        if form == "helper_closure":  # a helper closing over it
            t = self.tensor(place[1])
            self.namespace[f"helper{k}"] = (lambda v: lambda x: x * v)(t)
            return f"helper{k}(x)"
        if form == "wrapper":  # a wrapper that says it is torch's own function
            t = self.tensor(place[1])

            @functools.wraps(torch.exp)
            def wrapped(x, t=t):
                return torch.exp(x) * t

            self.namespace[f"wrapped{k}"] = wrapped
            return f"wrapped{k}(x)"
        expression = self.reach(k, place, True)
        if form == "branch":
            return f"({expression} if x.sum() > 0 else x)"
        if form == "metadata":
            return f"x * {expression}.shape[0]"
        if form == "op":
            return f"torch.exp({expression})"
        if form == "method":
            return f"{expression}.sum()"
        return expression


def watched(built):
    watcher = ParameterWatcher()
    with watcher:
        built.f(built.x)
    return watcher.variables(exclude=[built.x])


@SETTINGS
@given(st.lists(terms, min_size=0, max_size=4), st.booleans())
def test_the_proof_never_misses_a_parameter_that_the_watcher_sees(spec, positive):
    built = Built(spec, positive)
    read = watched(built)
    answer, _ = prove(built.f)
    if answer == "none":
        assert not read, f"the proof says none, the watcher saw {len(read)}"
    elif answer == "own":
        assert all(any(p is q for q in built.own) for p in read), "a Parameter not f's own"
    else:
        assert answer is None
    assert ParameterReach(built.f).possible(()) == (answer != "none")


def test_the_generator_reaches_every_answer():
    """The property above is not vacuous: each answer comes out of the generator, and the
    watcher sees a Parameter in cases of each non-none answer."""
    seen = set()
    for spec, expected in [
        ([], "none"),
        ([("plain", ("cell", False))], "none"),
        ([("op", ("cell", True))], "own"),
        ([("plain", ("global", True))], "own"),
        ([("plain", ("module", True))], None),
        ([("plain", ("list", True))], None),
        ([("helper", ("global", True))], None),
        ([("helper_closure", ("cell", True))], None),
        ([("wrapper", ("cell", True))], None),
        ([("plain", ("default", True))], None),
    ]:
        built = Built(spec, True)
        answer, _ = prove(built.f)
        assert answer == expected, spec
        if any(place[1] for _, place in spec):
            assert watched(built), spec
        seen.add(answer)
    assert seen == {"none", "own", None}


@derandomized(100)
@given(st.lists(terms, min_size=0, max_size=4), st.booleans(), st.data())
def test_a_kept_proof_answers_as_the_proof_of_a_new_function_of_its_code(spec, positive, data):
    """A new function of an analysed code (a function decorated again) that takes the kept
    answer (Note [a proof per code] in `_reach_check.py`) gets the answer its own proof gives,
    whatever its closure cells now hold."""
    built = Built(spec, positive)
    ParameterReach(built.f).possible(())  # analyses f, and keeps the answer where it may
    values = [
        data.draw(st.sampled_from([value, torch.nn.Parameter(torch.randn(3)), torch.randn(3), 2.0]))
        for value in built.cells.values()
    ]
    g = built.namespace["outer"](*values)
    answer, _ = prove(g)
    reach = ParameterReach(g)
    if reach.calm is not never:  # it took the kept answer
        assert reach.proof == answer
    assert reach.possible(()) == (answer != "none")
    assert reach.proof == answer
