"""What a reach proof (`_reach.py`) read, and the per-call check that it still holds: generated
once per form, bound to each decoration of the code it was made for.

# Note [a proof per code]
A function decorated inside `forward` is a new function of the same code on every call, and
proving anew that it reads no Parameter cost more than the rest of its call. The proof's answer
depends only on what the analysis read: f's code, the values of f's own closure cells, its
defaults, keyword defaults and attributes, the names its code looks up in its globals (and in
the user modules it names), and, recursively, the same for the functions it reaches. Everything
but f's own function and cells is the same objects for every decoration of the code; so the
proof is kept per code object (its `make`, in `PROOFS`), and a new function g of that code takes
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
code; so `PROOFS` is bounded: it keeps the answers for the last `_KEPT` codes, as the reading
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
# An analysis's answer with its per-call questions, bound to one function of the analysed code,
# in the order `ParameterReach` takes them: the answer ("none", "own" or None), `unchanged`,
# `calm`, `reads_none`, `reads_own`, `unrecorded`, `rerun` (`_reach.ParameterReach`).
Check = Callable[[], bool]
Taken = tuple[str | None, Check, Check, Check, Check, bool, bool]
# `make(fn)`: the `Taken` of fn, a function of the analysed code, or None when fn's own values
# ask for a new analysis (Note [a proof per code]).
Make = Callable[[Any], Taken | None]


def never() -> bool:
    return False


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


# The `make` of the last analysis of each code, where a new function of the code may take it
# (Note [a proof per code]); `ParameterReach` looks a new decoration's code up here.
PROOFS: dict[types.CodeType, Make] = {}
_KEPT = 256


def keep(f: Any, make: Make) -> None:
    code = f.__code__
    PROOFS.pop(code, None)
    PROOFS[code] = make
    if len(PROOFS) > _KEPT:
        del PROOFS[next(iter(PROOFS))]


def items(mapping: dict[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    """A dict's (name, value) pairs, kept apart: the dict can change in place."""
    return tuple(mapping.items()) if mapping else None


def _same_items(then: tuple[tuple[str, Any], ...] | None, now: dict[str, Any] | None) -> bool:
    """`now` holds the very values `then` (from `items`) lists, and nothing else."""
    if not then or not now or len(now) != len(then):
        return not then and not now
    return all(now.get(name, MISSING) is value for name, value in then)


def contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return MISSING


def checks_maker(deps: Deps, answer: str | None, runs: tuple[bool, bool]) -> Make:
    """`make(fn)`: the analysis's `answer` and `runs` (`Taken`) with the checks that everything
    `deps` lists still holds what it held (`unchanged`) and, also, that none of the plain
    tensors it lists requires grad (`calm`), for fn, a function of the analysed code (its own
    cells and values as Note [a proof per code] says), or None.

    The checks run on every call, so they are generated as one expression with each comparison
    written out (`ns0.get('torch', MISSING) is v0 and fn.__code__ is CODE and ...`), over the
    objects bound as closure variables, and without a loop or a call of its own. `make` runs on
    every decoration of a function decorated inside `forward`: its tests of fn's own values are
    written out too, and what it binds of fn (fn, its cells, their values, its defaults) is
    bound as the checks' default values, not in cells made per call of `make`.
    """
    env: dict[str, Any] = {
        "MISSING": MISSING, "contents": contents, "same": _same_items, "items": items,
        "NEVER": never,
    }  # fmt: skip
    lines: list[str] = []  # of `make`, before the checks
    bound: list[str] = []  # what `make` reads of fn that the checks use
    terms: list[str] = []
    quiet: list[str] = []
    if deps.own is not None:
        fn, code, defaults, kwdefaults, attributes = deps.own
        env["G"], env["CODE"] = fn.__globals__, code  # `PROOFS` holds the code too: its key
        lines.append("if fn.__globals__ is not G: return None")
        bound.append("fn")
        if fn.__code__.co_freevars:
            cells = range(len(fn.__code__.co_freevars))
            lines.append(f"{''.join(f'o{i}, ' for i in cells)}= fn.__closure__")
        reads: list[str] = []  # of the cells' values; an emptied cell: fn is analysed anew
        tests: list[str] = []
        for i, value, kind in deps.own_cells:
            bound.append(f"o{i}")
            if kind == "missing":
                tests.append(f"if contents(o{i}) is not MISSING: return None")
                terms.append(f"contents(o{i}) is MISSING")
                continue
            bound.append(f"c{i}")
            reads.append(f"    c{i} = o{i}.cell_contents")
            terms.append(f"o{i}.cell_contents is c{i}")
            if kind in ("type", "tensor"):
                env[f"T{i}"] = type(value)
                tests.append(f"if type(c{i}) is not T{i}: return None")
            elif kind == "same":
                env[f"W{i}"] = weakref.ref(value)
                tests.append(f"if c{i} is None or c{i} is not W{i}(): return None")
            if kind == "tensor":
                quiet.append(f"not c{i}.requires_grad")
        if reads:
            lines += ["try:", *reads, "except ValueError:", "    return None"]
        lines += tests
        terms.append("fn.__code__ is CODE")
        _function_terms("fn", "", (defaults, kwdefaults, attributes), terms, env, lines, bound)
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
        _function_terms(f"fn{k}", str(k), values, terms, env, None, bound)
    for k, tensor in enumerate(deps.tensors):
        env[f"t{k}"] = tensor
        quiet.append(f"not t{k}.requires_grad")
    calm = "calm" if quiet else "unchanged"
    taken = (
        repr(answer), "unchanged", calm, calm if answer == "none" else "NEVER",
        calm if answer == "own" else "NEVER", repr(runs[0]), repr(runs[1]),
    )  # fmt: skip
    outer = _outer_maker(
        ", ".join(env), "\n".join(lines), ", ".join(f"{name}={name}" for name in bound),
        " and ".join(terms) or "True", " and ".join(quiet), ", ".join(taken),
    )  # fmt: skip
    return outer(**env)


def _function_terms(
    fn: str,
    k: str,
    values: Any,
    terms: list[str],
    env: dict[str, Any],
    lines: list[str] | None,
    bound: list[str],
) -> None:
    """The terms that fn's defaults, keyword defaults and attributes are still what they were
    (`values`): read as `make` runs (`lines`, `bound`) for f's own, else kept in `env`."""
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
        elif attribute == "__defaults__":  # plain values, of the types f's are, when kept
            # A function of the code defined by the same `def` has the very same tuple.
            env["D"] = value
            refused = [f"{key} is None", f"len({key}) != {len(value)}"]
            for i, default in enumerate(value):
                env[f"DT{i}"] = type(default)
                refused.append(f"type({key}[{i}]) is not DT{i}")
            lines.append(f"{key} = {fn}.{attribute}")
            lines.append(f"if {key} is not D and ({' or '.join(refused)}): return None")
            bound.append(key)
        else:
            lines.append(f"{key} = items({fn}.{attribute})")
            bound.append(key)
            if attribute == "__kwdefaults__":
                refused = [f"{key} is None", f"len({key}) != {len(value)}"]
                for i, (name, default) in enumerate(value):
                    env[f"KT{i}"] = type(default)
                    refused += (f"{key}[{i}][0] != {name!r}", f"type({key}[{i}][1]) is not KT{i}")
                lines.append(f"if {' or '.join(refused)}: return None")
        if attribute == "__defaults__":
            terms.append(f"{fn}.__defaults__ is {key}")
        else:
            terms.append(f"same({key}, {fn}.{attribute})")
    if empty:
        terms.append(f"not ({' or '.join(empty)})")


@functools.lru_cache(maxsize=256)
def _outer_maker(
    names: str, lines: str, checks: str, expression: str, quiet: str, taken: str
) -> Callable[..., Make]:
    """The function that makes `make` over the objects `names` names, compiled once per form:
    when f reads a name that is rebound on every call, each call costs an analysis but no
    compilation. The checks take what `make` read of fn as default values (`checks`)."""
    calm = (
        f"        def calm({checks}):\n"
        "            try:\n"
        f"                return {expression} and {quiet}\n"
        "            except (KeyError, ValueError):\n"
        "                return False\n"
        if quiet
        else ""
    )
    body = "".join(f"        {line}\n" for line in lines.splitlines())
    source = (
        f"def outer({names}):\n"
        "    def make(fn):\n"
        f"{body}"
        f"        def unchanged({checks}):\n"
        "            try:\n"
        f"                return {expression}\n"
        "            except (KeyError, ValueError):\n"
        "                return False\n"
        f"{calm}"
        f"        return {taken}\n"
        "    return make\n"
    )
    made: dict[str, Any] = {}
    exec(compile(source, "<tf_compat_grad reach check>", "exec"), made)
    outer: Callable[..., Make] = made["outer"]
    return outer
