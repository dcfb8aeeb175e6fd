"""Whether a decorated function's own ops need recording: the unrecorded proof.

# Note [f unrecorded]
f runs with grad recording on (Note [where f runs] in `_eager.py`) so that what grad_fn reads of f's
work keeps its history, for second derivatives. When grad_fn can read nothing f computed, there is
nothing to keep: f then runs with grad mode off, as a hand-written `Function.forward` does, its
outputs need no detaching, and a second derivative is still exact, since grad_fn reads only the
arguments, which have their own history. `unrecorded(f)` says so for an unbound call whose arguments
are tensors and Python numbers, from f's code and its globals (the same globals the reach proof
reads, whose per-call check, `calm`, keeps the answer valid):

- f is a plain function whose own default values are numbers or strings, whose closure cells
  hold numbers, strings, tensors or Parameters (read only: f stores none of them, below), and
  which reads no Parameter (the reach proof's "none") or only those its own cells and globals
  hold ("own", Note [Parameters of f's own] in `_reach.py`: f then runs under the watcher, with
  grad mode off, and the Parameters it read are the call's variables as always);
- f's globals hold modules of torch or math only, and the builtins it names make numbers or
  plain containers (`len`, `range`, `tuple`, `isinstance`, ...; not `map` or `setattr`);
- f's code, and the code nested in it, store local variables only: no global, attribute, item
  or slice, no closure cell but with a function made there (so a cell grad_fn reads holds an
  argument of f or such a function), no argument of a function made in f that a function
  made in it closes over (f may pass it what it computed: `def keep(e): return lambda dy: dy
  * e`; a comprehension, which runs at once, may), no in-place
  operator (`x += y`), no name ending in `_` (in-place tensor methods) or starting with
  `__`, nothing of autograd's (`requires_grad`, `grad_fn`, `register_hook`, `enable_grad`,
  `autograd`, `out=`, `inplace=`, ...), no import, `with`, generator or class;
- a function made in f takes constant default values only (`variables=None`), and no method
  of a tensor is read without being called (`return y, e.mul` would carry e away).

So every tensor f computes is local to the call but for its outputs, which the node's history
replaces anyway; grad_fn, whatever f returns, can hold only arguments, constants and what f's cells
hold, none of it computed by f. An opcode this module does not list (a new Python release) answers
"recorded", as anything in doubt does: recording is always right, only slower.

`rerunnable(f)` reads the same code for Note [f run again] (`_rerun.py`): f may run unrecorded
and be run again, recorded, for a second derivative, when it does all of the above but that a
closure cell it stores may hold what it computed (grad_fn closing over `e = exp(x)` or over
f's output), and when no name it reads, attribute or keyword argument names anything listed in
`_IMPURE_PARTS` (part of a name, lower-cased: `rand`, `dropout`, `print`, `empty`, `scatter`,
...) or `_IMPURE_NAMES`, or starts with `set_`: what draws random numbers, has a side effect
(output, files, running statistics, collectives, `torch.ops`' custom ops) or may give another
value on another run (uninitialised memory, addresses, atomics on CUDA). The list errs wide: a
name it catches that is pure (`lgamma`, `normalize`) costs a recording, not a wrong
derivative.
"""

from __future__ import annotations

import dis
import functools
import inspect
import types
from typing import Any

import torch

from ._closure import PLAIN_TYPES, plain
from ._reach_check import MISSING, contents

_MODULES = frozenset({"torch", "math"})
_BUILTINS = frozenset(
    {"abs", "all", "any", "bool", "complex", "dict", "divmod", "float", "int", "isinstance",
     "len", "list", "max", "min", "pow", "print", "range", "round", "slice", "sorted", "str",
     "sum", "tuple", "ArithmeticError", "AssertionError", "IndexError", "KeyError",
     "NotImplementedError", "RuntimeError", "TypeError", "ValueError", "ZeroDivisionError"}
)  # fmt: skip
_AUTOGRAD_NAMES = frozenset(
    {"requires_grad", "grad_fn", "grad", "is_leaf", "retain_grad", "retains_grad",
     "register_hook", "register_post_accumulate_grad_hook", "_base", "_version", "data",
     "output_nr", "backward", "autograd", "func", "utils", "checkpoint", "_C", "_dynamo",
     "enable_grad", "set_grad_enabled", "is_grad_enabled", "no_grad", "inference_mode",
     "is_inference_mode_enabled", "out", "inplace", "Parameter", "distributions", "nn_module"}
)  # fmt: skip
# Every opcode of Python 3.10-3.13 that reads, computes, calls, jumps or stores a local.
_OPCODES = frozenset(
    {"NOP", "RESUME", "CACHE", "EXTENDED_ARG", "POP_TOP", "COPY", "SWAP", "DUP_TOP",
     "DUP_TOP_TWO", "ROT_TWO", "ROT_THREE", "ROT_FOUR", "ROT_N", "PUSH_NULL", "END_FOR",
     "POP_ITER", "NOT_TAKEN", "TO_BOOL", "LOAD_CONST", "LOAD_SMALL_INT", "LOAD_FAST",
     "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "LOAD_FAST_LOAD_FAST", "LOAD_DEREF",
     "LOAD_CLOSURE", "LOAD_GLOBAL", "LOAD_ATTR", "LOAD_METHOD", "LOAD_ASSERTION_ERROR",
     "RETURN_CONST", "RETURN_VALUE", "STORE_FAST", "STORE_FAST_LOAD_FAST",
     "STORE_FAST_STORE_FAST", "STORE_FAST_MAYBE_NULL", "DELETE_FAST", "MAKE_CELL",
     "COPY_FREE_VARS", "BINARY_OP", "BINARY_ADD", "BINARY_SUBTRACT", "BINARY_MULTIPLY",
     "BINARY_TRUE_DIVIDE", "BINARY_FLOOR_DIVIDE", "BINARY_MODULO", "BINARY_POWER",
     "BINARY_MATRIX_MULTIPLY", "BINARY_LSHIFT", "BINARY_RSHIFT", "BINARY_AND", "BINARY_OR",
     "BINARY_XOR", "UNARY_NEGATIVE", "UNARY_POSITIVE", "UNARY_NOT", "UNARY_INVERT",
     "COMPARE_OP", "IS_OP", "CONTAINS_OP", "BINARY_SUBSCR", "BINARY_SLICE", "BUILD_SLICE",
     "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_CONST_KEY_MAP", "BUILD_SET",
     "BUILD_STRING", "FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE",
     "LIST_APPEND", "LIST_EXTEND", "LIST_TO_TUPLE", "SET_ADD", "SET_UPDATE", "MAP_ADD",
     "DICT_UPDATE", "DICT_MERGE", "UNPACK_SEQUENCE", "UNPACK_EX", "GET_ITER", "FOR_ITER",
     "CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_FUNCTION_EX",
     "CALL_METHOD", "PRECALL", "KW_NAMES", "MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE",
     "CALL_INTRINSIC_1", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
     "JUMP_ABSOLUTE", "JUMP", "JUMP_NO_INTERRUPT", "JUMP_IF_FALSE_OR_POP",
     "JUMP_IF_TRUE_OR_POP", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE", "POP_JUMP_IF_NONE",
     "POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_FORWARD_IF_TRUE",
     "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_FALSE",
     "POP_JUMP_BACKWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE",
     "RAISE_VARARGS", "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH", "RERAISE",
     "SETUP_FINALLY", "POP_BLOCK", "JUMP_IF_NOT_EXC_MATCH"}
)  # fmt: skip
# What f run again (Note [f run again]) may not name: as part of a name, lower-cased...
_IMPURE_PARTS = (
    # random numbers
    "rand", "dropout", "bernoulli", "multinomial", "normal", "poisson", "uniform",
    "exponential", "geometric", "cauchy", "gamma", "dirichlet", "binomial", "sample", "seed",
    "rng", "generator", "fractional", "rrelu", "gumbel", "shuffle", "perm", "sobol", "noise",
    "attention", "rnn", "lstm", "gru",
    # side effects: output, files, state kept beside the arguments, collectives
    "print", "save", "load", "batch_norm", "instance_norm", "embedding", "distributed",
    "library", "hook", "manual", "synchronize", "stream", "event", "memory",
    # values that differ between runs: uninitialised memory, addresses, atomics on CUDA
    "empty", "data_ptr", "storage", "scatter", "index_add", "index_put", "index_reduce",
    "index_copy", "bincount", "histc", "histogram", "ctc", "nll_loss", "cumsum", "kthvalue",
    "median", "mode",
)  # fmt: skip
# ... and as a whole name (`torch.ops`: custom ops, which may have side effects).
_IMPURE_NAMES = frozenset({"ops", "put"})
_INTRINSICS = frozenset({"INTRINSIC_UNARY_POSITIVE", "INTRINSIC_LIST_TO_TUPLE"})
_DEFAULTS, _KWDEFAULTS = 0x01, 0x02  # MAKE_FUNCTION's and SET_FUNCTION_ATTRIBUTE's flags
# The instructions that may stand between a function's default values and its making, each
# pushing one value (`_producer`).
_MAKING = frozenset(
    {"LOAD_CONST", "LOAD_FAST", "LOAD_CLOSURE", "LOAD_DEREF", "BUILD_TUPLE", "MAKE_FUNCTION",
     "SET_FUNCTION_ATTRIBUTE"}
)  # fmt: skip
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>"})  # Python 3.11
_FUNCTION_MAKERS = frozenset({"MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE"})
# What a closure cell of f may hold: what grad_fn may read of it is then nothing f computed.
_CELL_TYPES = PLAIN_TYPES | {torch.Tensor, torch.nn.Parameter}


def unrecorded(f: Any) -> bool:
    """Whether f's ops need no recording (Note [f unrecorded]), its reach proof having
    answered "none" or "own"."""
    return _reads_only_torch(f, again=False)


def rerunnable(f: Any) -> bool:
    """Whether f may run unrecorded and run again, recorded, for a second derivative (Note [f
    unrecorded], its end), its reach proof having answered "none"; and f has no closure cells
    (run again, it would read them again, rebound or not)."""
    return _reads_only_torch(f, again=True)


def _reads_only_torch(f: Any, again: bool) -> bool:
    if type(f) is not types.FunctionType:
        return False
    code = f.__code__
    if again and code.co_freevars:
        return False
    for cell in f.__closure__ or ():
        if type(contents(cell)) not in _CELL_TYPES:
            return False
    names = _global_names(code, again)
    if names is None:
        return False
    defaults, kwdefaults = f.__defaults__, f.__kwdefaults__
    if (defaults and not plain(defaults)) or (kwdefaults and not plain(kwdefaults.values())):
        return False
    namespace = f.__globals__
    for name in names:
        value = namespace.get(name, MISSING)
        if value is MISSING:  # a builtin: every name of `_BUILTINS` is one on Python 3.10+
            if name not in _BUILTINS:
                return False
        elif not (
            isinstance(value, types.ModuleType) and value.__name__.partition(".")[0] in _MODULES
        ):
            return False
    return True


@functools.lru_cache(maxsize=1024)
def _global_names(code: types.CodeType, again: bool) -> frozenset[str] | None:
    """The global names code and the code nested in it read, or None when its code can keep
    what f computes (Note [f unrecorded]) or, `again`, can differ when run again (Note [f run
    again])."""
    names: set[str] = set()
    return frozenset(names) if _local_only(code, names, again, nested=False) else None


def _local_only(code: types.CodeType, names: set[str], again: bool, nested: bool) -> bool:
    forbidden = _impure if again else _forbidden
    if any(forbidden(name) for name in code.co_names):
        return False
    if nested and not again and not _arguments_uncaptured(code):
        return False
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if not _local_only(const, names, again, nested=True):
                return False
        elif any(forbidden(s) for s in (const if isinstance(const, tuple) else (const,)) if isinstance(s, str)):  # fmt: skip
            return False  # a keyword argument's name (`out=`, `requires_grad=`, `generator=`)
    instructions = list(dis.get_instructions(code))
    from_module = False  # the instruction before read a global or an attribute of one
    for i, ins in enumerate(instructions):
        op = ins.opname
        if op == "STORE_DEREF":  # a cell may hold a function made here, nothing computed
            if not again and _producer(instructions, i, 0) not in _FUNCTION_MAKERS:
                return False
            continue
        if op not in _OPCODES:
            return False
        if op == "EXTENDED_ARG":
            continue
        after_module, from_module = (
            from_module,
            op == "LOAD_GLOBAL" or (from_module and op in ("LOAD_ATTR", "LOAD_METHOD")),
        )
        if op == "LOAD_GLOBAL":
            names.add(ins.argval)
        elif op == "BINARY_OP" and ins.argrepr.endswith("="):
            return False  # `x += y`: in place on a tensor
        elif op == "CALL_INTRINSIC_1" and ins.argrepr not in _INTRINSICS:
            return False
        elif op == "LOAD_ATTR" and not after_module and "NULL|self" not in ins.argrepr:
            if callable(getattr(torch.Tensor, ins.argval, None)):
                return False  # a tensor's bound method, not called (3.12+: "NULL|self")
        elif op in ("MAKE_FUNCTION", "SET_FUNCTION_ATTRIBUTE") and ins.arg:
            if ins.arg & _KWDEFAULTS:
                return False
            # The default values: the deepest of what MAKE_FUNCTION takes, the value below the
            # function for SET_FUNCTION_ATTRIBUTE; both at 1 - (what it pushes, 1).
            if ins.arg & _DEFAULTS and _producer(instructions, i, -_effect(ins)) != "LOAD_CONST":
                return False
    return True


def _arguments_uncaptured(code: types.CodeType) -> bool:
    """Whether no function made in a function made in f (code) closes over one of its
    arguments: f may call it with what it computed (`def keep(e): return lambda dy: dy * e`),
    and the function made in it would then keep that for grad_fn. (A comprehension, a function
    of its own before Python 3.12, runs at once and keeps nothing.)"""
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    arguments = set(code.co_varnames[:count]).intersection(code.co_cellvars)
    return not arguments or not arguments.intersection(_kept_free(code))


def _kept_free(code: types.CodeType) -> set[str]:
    """The free variables of the functions made in code that may outlive its run: all but
    comprehensions, through which it looks."""
    free: set[str] = set()
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            if const.co_name not in _COMPREHENSIONS:
                free.update(const.co_freevars)
            free |= _kept_free(const)
    return free


def _forbidden(name: str) -> bool:
    return name in _AUTOGRAD_NAMES or name.startswith("__") or (name.endswith("_") and not name.startswith("_"))  # fmt: skip


def _impure(name: str) -> bool:
    """A name of something that may draw random numbers, have a side effect or differ from one
    run to the next (Note [f run again]), or one `_forbidden` names."""
    lowered = name.lower()
    return (
        _forbidden(name)
        or lowered in _IMPURE_NAMES
        or lowered.startswith("set_")
        or any(part in lowered for part in _IMPURE_PARTS)
    )


def _producer(instructions: list[dis.Instruction], at: int, depth: int) -> str:
    """The name of the instruction that pushed the value `depth` places below the top of the
    stack before instruction `at`, when only instructions that push one value each (`_MAKING`)
    stand between; else "" (unknown)."""
    for ins in reversed(instructions[:at]):
        if ins.opname not in _MAKING or ins.is_jump_target:
            return ""
        if depth == 0:
            return str(ins.opname)
        depth -= _effect(ins)  # what it took, less the one it pushed
    return ""


def _effect(ins: dis.Instruction) -> int:
    if ins.opcode < dis.HAVE_ARGUMENT:
        return dis.stack_effect(ins.opcode)
    return dis.stack_effect(ins.opcode, ins.arg)
