"""What a reach proof (`_reach.py`) read, and the per-call check that it still holds: generated
once per form, bound to each decoration of the code it was made for.

# Note [a proof per code]
A function decorated inside `forward` is a new function of the same code on every call, and
proving anew that it reads no Parameter cost more than the rest of its call. The proof's answer
depends only on what the analysis read: f's code, the values of f's own closure cells, its
defaults, keyword defaults and attributes, the names its code looks up in its globals (and in
the user modules it names), and, recursively, the same for the functions it reaches. Everything
but f's own function and cells is the same objects for every decoration of the code; so the
proof is kept per code object (`Proof`, in `_PROOFS`), and a new function g of that code takes
its answer when, checked once as it is decorated (`make(g)` answers None otherwise):

- g's globals are f's (the names the proof read were read there);
- each of g's cells the analysis read holds a value that the analysis treats the same way,
  reading nothing through it: a value of the same exact type among those the proof accepts as
  they are (numbers, strings, dtypes, builtins: `_SAFE_TYPES`), a plain tensor, a Parameter
  (one of f's own, Note [Parameters of f's own]), an empty cell; or the very object the
  analysis met, held weakly, when the analysis answered for it without reading anything
  through it (`self` of a `forward`, where the proof stops; torch's own modules and functions);
- g's defaults and keyword defaults are plain values (None, numbers, strings: read as they are)
  of the types f's are (`scale=1.0`), and g has no attributes;
- and, on each call, as for f: g's code is still that code, g's defaults, keyword defaults and
  attributes are still those, g's cells still hold what they held when g was decorated, and every
  other name, cell and function the analysis read still holds what it held (the check f's own
  calls run).

With those, the analysis of g would visit the very objects the analysis of f visited, in the same
order, and give the same answer. A proof that read anything else through f's own cells or
defaults (a helper function defined in `forward`, a tuple, a default tensor) is not kept: what it
read would then be a decoration's, and holding it would keep that decoration's closure alive;
such a decoration is proved anew. The kept proofs hold the globals they read, which hold the
code; so `_PROOFS` is bounded: it keeps the answers for the last `_KEPT` codes, as the reading
of codes (`_reach._read`) is kept. What it saves is measured in benchmarks/README.md
("Compile guards and decorating in forward").
"""

from __future__ import annotations

import functools
import types
import weakref
from collections.abc import Callable
from typing import Any

MISSING = object()

# A function an analysis read: the function, its code, its defaults, its keyword defaults and
# its attributes (the last two as `items` gives them); each can be rebound after the analysis.
Function = tuple[types.FunctionType, types.CodeType, Any, Any, Any]
Checks = tuple[Callable[[], bool], Callable[[], bool]]


class Deps:
    """The names, closure cells and functions an analysis read, with what it found there; f's
    own function and cells apart (Note [a proof per code])."""

    __slots__ = ("cells", "functions", "names", "own", "own_cells", "shared", "tensors")

    def __init__(self) -> None:
        self.names: list[tuple[dict[str, Any], str, Any]] = []
        self.cells: list[tuple[types.CellType, Any]] = []
        self.functions: list[Function] = []
        self.tensors: list[Any] = []  # the plain tensors f can name (Note [lost gradients])
        self.own: Function | None = None  # the decorated function, when it is a function
        # Its cells the analysis read: (index, value, how a new decoration's value is checked:
        # "type", "tensor", "missing", "same" (held weakly) or "held" (the proof is not kept)).
        self.own_cells: list[tuple[int, Any, str]] = []
        self.shared = True  # whether a new function of f's code may take the answer


class Proof:
    """An analysis's answer, `make`, which binds its per-call checks to a function of the
    analysed code, or answers None when that function's own values ask for a new analysis, and
    `runs`: whether f's ops need no recording, else whether f may run again (`_reach._runs`),
    which holds for every function `make` accepts (its cells and defaults hold values of the
    same types, its globals are f's)."""

    __slots__ = ("answer", "make", "runs")

    def __init__(
        self, answer: str | None, make: Callable[[Any], Checks | None], runs: tuple[bool, bool]
    ) -> None:
        self.answer = answer
        self.make = make
        self.runs = runs


_PROOFS: dict[types.CodeType, Proof] = {}
_KEPT = 256


def kept(f: Any) -> Proof | None:
    """The proof kept for f's code (Note [a proof per code])."""
    return _PROOFS.get(f.__code__) if type(f) is types.FunctionType else None


def keep(f: Any, proof: Proof) -> None:
    code = f.__code__
    _PROOFS.pop(code, None)
    _PROOFS[code] = proof
    if len(_PROOFS) > _KEPT:
        del _PROOFS[next(iter(_PROOFS))]


def items(mapping: dict[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    """A dict's (name, value) pairs, kept apart: the dict can change in place."""
    return tuple(mapping.items()) if mapping else None


def _same_items(then: tuple[tuple[str, Any], ...] | None, now: dict[str, Any] | None) -> bool:
    """`now` holds the very values `then` (from `items`) lists, and nothing else."""
    if not then or not now or len(now) != len(then):
        return not then and not now
    return all(now.get(name, MISSING) is value for name, value in then)


def _types(pairs: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, type], ...]:
    """The names of `items`'s pairs with the types of their values."""
    return tuple((name, type(value)) for name, value in pairs)


def contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return MISSING


def checks_maker(deps: Deps) -> Callable[[Any], Checks | None]:
    """`make(fn)`: the checks that everything `deps` lists still holds what it held (`unchanged`)
    and, also, that none of the plain tensors it lists requires grad (`calm`), for fn, a
    function of the analysed code (its own cells and values as Note [a proof per code] says).

    They run on every call, so they are generated as one expression with each comparison written
    out (`ns0.get('torch', MISSING) is v0 and fn0.__code__ is code0 and ...`), over the objects
    bound as closure variables, and without a loop or a call of its own.
    """
    env: dict[str, Any] = {
        "MISSING": MISSING, "contents": contents, "same": _same_items, "items": items,
        "types": _types,
    }  # fmt: skip
    lines: list[str] = []  # of `make`, before the checks
    terms: list[str] = []
    quiet: list[str] = []
    if deps.own is not None:
        fn, _, defaults, kwdefaults, attributes = deps.own
        env["G"] = fn.__globals__
        lines.append("if fn.__globals__ is not G: return None")
        if fn.__code__.co_freevars:
            cells = range(len(fn.__code__.co_freevars))
            lines.append(f"{''.join(f'o{i}, ' for i in cells)}= fn.__closure__")
        for i, value, kind in deps.own_cells:
            lines.append(f"c{i} = contents(o{i})")
            if kind == "missing":
                lines.append(f"if c{i} is not MISSING: return None")
                terms.append(f"contents(o{i}) is MISSING")
                continue
            terms.append(f"o{i}.cell_contents is c{i}")
            if kind in ("type", "tensor"):
                env[f"T{i}"] = type(value)
                lines.append(f"if type(c{i}) is not T{i}: return None")
            elif kind == "same":
                env[f"W{i}"] = weakref.ref(value)
                lines.append(f"if c{i} is None or c{i} is not W{i}(): return None")
            if kind == "tensor":
                quiet.append(f"not c{i}.requires_grad")
        lines.append("CODE = fn.__code__")  # not kept: the proof would keep its own code alive
        terms.append("fn.__code__ is CODE")
        _function_terms("fn", "", (defaults, kwdefaults, attributes), terms, env, lines)
    seen: set[tuple[int, str]] = set()
    for k, (namespace, name, value) in enumerate(deps.names):
        if (id(namespace), name) in seen:
            continue
        seen.add((id(namespace), name))
        env[f"ns{k}"], env[f"v{k}"] = namespace, value
        # A name deleted since raises KeyError: the check then answers False.
        read = f"ns{k}.get({name!r}, MISSING)" if value is MISSING else f"ns{k}[{name!r}]"
        terms.append(f"{read} is v{k}")
    for k, (cell, value) in enumerate(deps.cells):
        env[f"cell{k}"], env[f"c{k}_"] = cell, value
        # A cell emptied since raises ValueError: the check then answers False.
        read = f"contents(cell{k})" if value is MISSING else f"cell{k}.cell_contents"
        terms.append(f"{read} is c{k}_")
    for k, (fn, code, *values) in enumerate(deps.functions):
        env[f"fn{k}"], env[f"code{k}"] = fn, code
        terms.append(f"fn{k}.__code__ is code{k}")
        _function_terms(f"fn{k}", str(k), values, terms, env, None)
    for k, tensor in enumerate(deps.tensors):
        env[f"t{k}"] = tensor
        quiet.append(f"not t{k}.requires_grad")
    expression = " and ".join(terms) or "True"
    return _outer_maker(", ".join(env), "\n".join(lines), expression, " and ".join(quiet))(**env)


def _function_terms(
    fn: str, k: str, values: Any, terms: list[str], env: dict[str, Any], lines: list[str] | None
) -> None:
    """The terms that fn's defaults, keyword defaults and attributes are still what they were
    (`values`): read as `make` runs (`lines`) for f's own, else kept in `env`."""
    empty = []  # the attributes that held nothing: one test for all of them
    for attribute, value, key in zip(
        ("__defaults__", "__kwdefaults__", "__dict__"),
        values,
        (f"d{k}", f"kw{k}", f"attrs{k}"),
        strict=True,
    ):
        if not value:
            empty.append(f"{fn}.{attribute}")
            continue
        if lines is None:
            env[key] = value
        elif attribute == "__defaults__":  # plain values, as `types` lists them, when kept
            env["DT"] = tuple(map(type, value))
            lines.append(f"{key} = {fn}.{attribute}")
            lines.append(f"if {key} is None or tuple(map(type, {key})) != DT: return None")
        else:
            lines.append(f"{key} = items({fn}.{attribute})")
            if attribute == "__kwdefaults__":
                env["KT"] = _types(value)
                lines.append(f"if {key} is None or types({key}) != KT: return None")
        if attribute == "__defaults__":
            terms.append(f"{fn}.__defaults__ is {key}")
        else:
            terms.append(f"same({key}, {fn}.{attribute})")
    if empty:
        terms.append(f"not ({' or '.join(empty)})")


@functools.lru_cache(maxsize=256)
def _outer_maker(
    names: str, lines: str, expression: str, quiet: str
) -> Callable[..., Callable[[Any], Checks | None]]:
    """The function that makes `make` over the objects `names` names, compiled once per form:
    when f reads a name that is rebound on every call, each call costs an analysis but no
    compilation."""
    calm = (
        "        def calm():\n"
        "            try:\n"
        f"                return {expression} and {quiet}\n"
        "            except (KeyError, ValueError):\n"
        "                return False\n"
        "        return unchanged, calm\n"
        if quiet
        else "        return unchanged, unchanged\n"
    )
    body = "".join(f"        {line}\n" for line in lines.splitlines())
    source = (
        f"def outer({names}):\n"
        "    def make(fn):\n"
        f"{body}"
        "        def unchanged():\n"
        "            try:\n"
        f"                return {expression}\n"
        "            except (KeyError, ValueError):\n"
        "                return False\n"
        f"{calm}"
        "    return make\n"
    )
    made: dict[str, Any] = {}
    exec(compile(source, "<tf_compat_grad reach check>", "exec"), made)
    outer: Callable[..., Callable[[Any], Checks | None]] = made["outer"]
    return outer
