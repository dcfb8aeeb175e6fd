"""A call's arguments against a rule of the table (`_table`): the facts that hold of each
argument (a literal int, an indexed shape, a name...) and `_choose`, which picks the rule's variant
that fits them or raises `_Untranslated` with the reason."""

from __future__ import annotations

import libcst as cst

from ._rule import Rule, Variant, placeholders
from ._syntax import _code, _dotted
from ._table_keras import FLOATX
from ._table_tensors import DTYPES


class _Untranslated(Exception):
    """Raised inside the transformer to leave a construct as it is, with the reason."""


# The rules (by their first name) whose argument may be a whole `tf.shape(x)`, a torch.Size:
# the argument's position and keyword.
_SHAPE_ARGUMENT = {
    "reshape": (1, "shape"),
    "ones": (0, "shape"),
    "zeros": (0, "shape"),
    "fill": (0, "dims"),
    "broadcast_to": (1, "shape"),
    "random.uniform": (0, "shape"),
    "random.normal": (0, "shape"),
    "random.truncated_normal": (0, "shape"),
}


# TF1's deprecated argument names -> their TF2 names (`tf.reduce_sum(x, reduction_indices=1,
# keep_dims=True)`, `tf.nn.softmax(x, dim=0)`, `tf.argmax(x, dimension=1)`).
_DEPRECATED = {
    "keep_dims": "keepdims",
    "reduction_indices": "axis",
    "dim": "axis",
    "dimension": "axis",
    "squeeze_dims": "axis",
}


def placeholders_use(rule: Rule, param: str) -> bool:
    """Whether a template of the rule uses the parameter (then it is not an alias there)."""
    return any(param in placeholders(v.template) for v in rule.variants)


def _number(node: cst.BaseExpression) -> cst.Integer | cst.Float | None:
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        node = node.expression
    return node if isinstance(node, (cst.Integer, cst.Float)) and not node.lpar else None


def _numbers(node: cst.BaseExpression) -> list[cst.Integer | cst.Float] | None:
    """The numbers of a literal number or nested list/tuple of them; None if not one."""
    number = _number(node)
    if number is not None:
        return [number]
    if isinstance(node, (cst.List, cst.Tuple)):
        found: list[cst.Integer | cst.Float] = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None
            inner = _numbers(element.value)
            if inner is None:
                return None
            found.extend(inner)
        return found
    return None


def _intlike(node: cst.BaseExpression, ints: frozenset[str] = frozenset()) -> bool:
    """A Python int in torch: a literal int, an indexed `.shape`, `len(...)`, a name in `ints`
    (assigned only such values), or `+ - *` of them."""
    if isinstance(node, cst.Name):
        return node.value in ints
    number = _number(node)
    if number is not None:
        return isinstance(number, cst.Integer)
    if isinstance(node, cst.Subscript):  # x.shape[i], list(x.shape)[i]
        value = node.value
        if isinstance(value, cst.Call) and _dotted(value.func) == "list" and len(value.args) == 1:
            value = value.args[0].value
        return isinstance(value, cst.Attribute) and value.attr.value == "shape"
    if isinstance(node, cst.Call):
        return isinstance(node.func, cst.Name) and node.func.value == "len"
    if isinstance(node, cst.BinaryOperation) and isinstance(
        node.operator, (cst.Add, cst.Subtract, cst.Multiply)
    ):
        return _intlike(node.left, ints) and _intlike(node.right, ints)
    return False


def _facts(param: str, node: cst.BaseExpression, ints: frozenset[str] = frozenset()) -> set[str]:
    facts = set()
    if isinstance(node, cst.Name) and node.value not in ("True", "False", "None"):
        facts.add(f"{param}:name")
    if _intlike(node, ints):
        facts.add(f"{param}:intlike")
    number = _number(node)
    if number is not None and float(number.evaluated_value) != 0:
        facts.add(f"{param}:nonzero")
    if (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "shape"
    ):
        facts.add(f"{param}:size")
    numbers = _numbers(node)
    if numbers is not None:
        facts.add(f"{param}:literal")
        integers = all(isinstance(n, cst.Integer) for n in numbers)
        if integers:
            facts.add(f"{param}:ints")
        if _number(node) is not None:
            facts.add(f"{param}:number")
            if integers:
                facts.update((f"{param}:axis", f"{param}:axes"))
        elif integers and numbers:
            facts.add(f"{param}:axes")
    return facts


def _simple(node: cst.BaseExpression) -> bool:
    """Whether an expression may be written twice: a name, a dotted name or a number, negated
    or not, or a literal list or tuple of those (`-delta`, `[1]`)."""
    while isinstance(node, cst.Attribute):
        node = node.value
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, (cst.Minus, cst.Plus)):
        return _simple(node.expression)
    if isinstance(node, (cst.List, cst.Tuple)):
        return all(isinstance(e, cst.Element) and _simple(e.value) for e in node.elements)
    return isinstance(node, cst.Name) or _number(node) is not None


def _choose(
    rule: Rule, call: cst.Call, subscripted: bool, ints: frozenset[str] = frozenset()
) -> tuple[Variant, dict[str, cst.BaseExpression]]:
    """The variant of `rule` that fits the call's arguments, and the arguments by parameter."""
    assert rule.params is not None
    if not rule.variants:
        raise _Untranslated(rule.otherwise)
    given: dict[str, cst.BaseExpression] = {}
    for position, arg in enumerate(call.args):
        if arg.star:
            raise _Untranslated(f"`{arg.star}` arguments cannot be matched to parameters")
        if arg.keyword is None:
            if position >= len(rule.params):
                raise _Untranslated(
                    f"positional argument {position + 1} is not translated (pass it by keyword)"
                )
            param = rule.params[position]
        else:
            param = arg.keyword.value
        given[param] = arg.value
    for alias, param in _DEPRECATED.items():  # TF1's old names of arguments
        if alias in given and param in rule.params and not placeholders_use(rule, alias):
            if param in given:
                raise _Untranslated(f"both `{alias}=` and `{param}=` are given")
            given[param] = given.pop(alias)
    dtype = given.get("dtype")
    if dtype is not None and _code(dtype) == FLOATX:  # `dtype=K.floatx()`
        given["dtype"] = cst.parse_expression("torch.get_default_dtype()")
    elif isinstance(dtype, cst.SimpleString):  # TF takes a dtype's name too
        name = dtype.evaluated_value
        if name not in DTYPES:
            raise _Untranslated(f"the dtype {name!r} has no torch dtype of that name")
        given["dtype"] = cst.Attribute(cst.Name("torch"), cst.Name(str(name)))
    facts = {"subscripted"} if subscripted else set()
    for param in rule.drop:
        given.pop(param, None)
    for param, default in rule.flags.items():
        if param not in given:
            continue
        value = given[param]
        if not (isinstance(value, cst.Name) and value.value in ("True", "False")):
            if param in rule.dynamic:
                continue  # an expression: an ordinary argument
            raise _Untranslated(f"`{param}=` must be a literal True or False")
        del given[param]
        if (value.value == "True") != default:
            facts.add(f"{param}={value.value}")
    for param, text in rule.strings.items():
        if param not in given:
            continue
        string = given.pop(param)
        if not isinstance(string, cst.SimpleString) or string.prefix:
            raise _Untranslated(f"`{param}=` must be a literal string")
        if string.raw_value != text:
            facts.add(f"{param}={string.raw_value}")
    for param, value in given.items():
        facts |= _facts(param, value, ints)
    for fact, why in rule.refuse.items():
        if fact in facts:
            raise _Untranslated(why)
    for variant in rule.variants:
        used = placeholders(variant.template)
        flag_facts = {f for f in facts if "=" in f}
        if set(used) == set(given) and variant.when <= facts and flag_facts <= variant.when:
            return variant, given
    known = {p for v in rule.variants for p in placeholders(v.template)}
    unknown = sorted(set(given) - known - set(rule.flags))
    if unknown:
        raise _Untranslated(f"argument `{unknown[0]}` is not translated")
    raise _Untranslated(rule.otherwise or "this combination of arguments is not translated")
