"""The LibCST transformer that applies the translation table (`_table`) to a module.

The module-level imports of `_imports._bindings` bind the names it translates (`import tensorflow
as tf`, `tensorflow.compat.v2`, `from tensorflow import nn, custom_gradient`); every use of a name
bound by another tensorflow import is flagged. `tf.GradientTape` blocks are translated by
`_tape`. A construct it cannot translate with certainty is left as written, with a
`# tf_compat_grad port: <why>` comment on the line above its statement, and reported as flagged.
Comments and formatting elsewhere are kept by LibCST; a comment inside a translated call that the
translation has no place for moves above the statement.

The transformer is `_Porter` here (names, calls, `@tf.function`, tensor methods), built on
`_statements._Statements` (`tf.GradientTape` blocks, statements removed whole),
`_captures._Captures` (`captured="constant"`), `_classes._Classes` (Keras and `tf.Module`
subclasses), `_imports._Imports` (the tensorflow imports and the names they bind) and
`_state._PorterState` (its state and bookkeeping); a call's arguments are matched to a rule by
`_arguments` and put into its template by `_template`.
"""

from __future__ import annotations

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import _tape
from ._arguments import _SHAPE_ARGUMENT, _choose, _simple, _Untranslated
from ._report import KEPT, MARK, Entry, PortResult
from ._rule import _PLACEHOLDER, Rule, placeholders
from ._statements import _Statements
from ._syntax import _CONTAINERS, _OPERATORS, _assigned_values, _code, _dotted, _values
from ._table import TABLE
from ._template import _ATOMS, _OPERANDS, _Fill, _parsed, _roots, _wrapped

# Decorators without effect in torch, removed with their arguments.
_REMOVED_DECORATORS = (
    "keras.utils.register_keras_serializable",
    "keras.saving.register_keras_serializable",
)


def _unknown(name: str) -> str:
    """Why a tensorflow name outside the table is left as it is."""
    if name.startswith(("keras.layers.", "compat.v1.keras.layers.")):
        return (
            "a Keras layer that tf_compat_grad.layers does not have (it has Dense, Conv2D, "
            "BatchNormalization, Activation, ReLU, Softmax, Dropout, Flatten, Lambda): write it "
            "with torch.nn, minding Keras's weight layout (kernels `(in, out)`, channels-last) "
            "and defaults"
        )
    return "not in the translation table"


def _as_lambda(rule: Rule) -> str:
    """A function-valued name used as a value (`act = tf.nn.softplus`): a lambda taking its
    first parameters, whose body is the translation a call with just those arguments gets (the
    first variant that needs no fact about them); a call of it with other arguments fails with
    a TypeError. "" if no variant takes its leading parameters alone."""
    params = [p for p in rule.params or () if p not in rule.drop]
    for count in range(1, len(params) + 1):
        for variant in rule.variants:
            if not variant.when and set(placeholders(variant.template)) == set(params[:count]):
                body = _PLACEHOLDER.sub(r"\1", variant.template)
                return f"(lambda {', '.join(params[:count])}: {body})"
    return ""


class PortSyntaxError(ValueError):
    """The input is not valid Python."""


def port_module(source: str, filename: str) -> PortResult:
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as error:
        raise PortSyntaxError(
            f"{filename}:{error.raw_line}:{error.raw_column}: cannot parse the input: "
            f"{error.message}; `port` translates valid Python 3 source"
        ) from None
    porter = _Porter()
    code = MetadataWrapper(_tape.as_with(module)).visit(porter).code
    entries = sorted(porter.entries, key=lambda e: e.line)
    return PortResult(_with_header(code, entries), tuple(entries))


def _with_header(code: str, entries: list[Entry]) -> str:
    """The code, led by the list of what must be finished by hand (after a `#!` line)."""
    todo = [e for e in entries if e.status == "flagged" and not e.why.startswith(KEPT)]
    if not todo:
        return code
    header = [f"{MARK} finish by hand: {len(todo)} construct(s), each marked '{MARK}' below:"]
    header += [f"#   {e.tf} in {e.function} (line {e.line} of the TensorFlow source)" for e in todo]
    lines = code.splitlines(keepends=True)
    first = 1 if lines and lines[0].startswith("#!") else 0
    return "".join([*lines[:first], *(line + "\n" for line in header), *lines[first:]])


# --- the transformer -------------------------------------------------------------------------


class _Porter(_Statements):
    """The transformer: tensorflow names and calls, `@tf.function`, TF-only tensor methods
    (its state is `_PorterState`, its imports `_Imports`, the statements it translates or
    removes whole `_Statements`)."""

    # --- names and calls

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self.skip.add(id(node.value))  # only the whole dotted name is looked up
        self.skip.add(id(node.attr))

    def visit_Param(self, node: cst.Param) -> None:
        self.skip.add(id(node.name))

    def visit_Call(self, node: cst.Call) -> None:
        self.skip.add(id(node.func))  # looked up with its arguments in leave_Call
        name = self.tf_name(node.func)
        shape = _SHAPE_ARGUMENT.get(TABLE[name].names[0]) if name in TABLE else None
        if shape is not None:  # a `tf.shape(x)` there may be a torch.Size
            position, keyword = shape
            for index, arg in enumerate(node.args):
                if (arg.keyword is None and index == position) or (
                    arg.keyword is not None and arg.keyword.value == keyword
                ):
                    self.subscripted.add(id(arg.value))

    def visit_Subscript(self, node: cst.Subscript) -> None:
        self.subscripted.add(id(node.value))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if id(original_node) in self.skip:
            return updated_node
        if original_node.value in self.aliases:
            self.untranslated(
                original_node,
                original_node.value,
                "the tensorflow module used as a value: translate this use by hand",
            )
            return updated_node
        if original_node.value in self.direct:
            return self.translate_value(original_node, updated_node)
        self.foreign_use(original_node, original_node)
        return updated_node

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if id(original_node) in self.skip:
            return updated_node
        rank = self.shape_rank(original_node, updated_node)
        if rank is not None:
            return rank
        if self.tf_name(updated_node) is None:
            self.foreign_use(original_node, updated_node)
        return self.translate_value(original_node, updated_node)

    def shape_rank(self, original: cst.Attribute, node: cst.Attribute) -> cst.BaseExpression | None:
        """`x.shape.ndims`, `x.shape.rank` -> `x.dim()` (eager ranks are known: an int);
        `x.dtype.is_floating` -> `x.dtype.is_floating_point`, `x.dtype.base_dtype` ->
        `x.dtype`: attributes only TF's shapes and dtypes have."""
        value = node.value
        owner = value.attr.value if isinstance(value, cst.Attribute) else ""
        result: cst.BaseExpression
        if owner == "shape" and node.attr.value in ("ndims", "rank"):
            result = cst.Call(
                cst.Attribute(cst.ensure_type(value, cst.Attribute).value, cst.Name("dim"))
            )
        elif owner == "dtype" and node.attr.value == "is_floating":
            result = node.with_changes(attr=cst.Name("is_floating_point"))
        elif owner == "dtype" and node.attr.value == "base_dtype":
            result = value
        else:
            return None
        self.translated(original, f".{owner}.{node.attr.value}", _code(result))
        return result

    def translate_value(
        self, original_node: cst.BaseExpression, updated_node: cst.BaseExpression
    ) -> cst.BaseExpression:
        """A tensorflow name used as a value, not called: `tf.float32`, `@tf.custom_gradient`."""
        name = self.tf_name(updated_node)
        if name is None:
            return updated_node
        shown = _dotted(updated_node)
        rule = TABLE.get(name)
        value = (rule.value or _as_lambda(rule)) if rule is not None else ""
        if rule is None or not value:
            if rule is None:
                why = _unknown(name)
            elif rule.variants:
                why = (
                    "used as a value, not called: only its calls are translated (no variant "
                    "takes its leading arguments alone)"
                )
            else:
                why = rule.otherwise
            self.untranslated(original_node, shown, why)
            return updated_node
        self.translated(original_node, shown, value)
        self.needed |= _roots(value)
        return _parsed(value)

    def leave_AugAssign(
        self, original_node: cst.AugAssign, updated_node: cst.AugAssign
    ) -> cst.AugAssign | cst.Assign:
        """`x += v` -> `x = x + v` where x holds a tensor (or a number): every value the function
        assigns it is an operation's or a TF op's result. In TF that makes a new tensor; in
        torch `+=` would write into x, which a backward may still need (sqrt's output)."""
        super().leave_AugAssign(original_node, updated_node)  # x: no longer known to be an int
        target = original_node.target
        if (
            not isinstance(target, cst.Name)
            or not self.functions
            or isinstance(original_node.value, _CONTAINERS)
        ):
            return updated_node
        values = _assigned_values(self.functions[-1], target.value)
        if not values or not all(self.tensor_valued(v) for v in values):
            return updated_node
        operator = _OPERATORS[type(original_node.operator)]()
        value = _wrapped(updated_node.value, _OPERANDS)
        result = cst.Assign(
            [cst.AssignTarget(updated_node.target)],
            cst.BinaryOperation(updated_node.target, operator, value),
        )
        self.translated(original_node, _code(original_node), _code(result))
        return result

    def tensor_valued(self, value: cst.BaseExpression) -> bool:
        """An arithmetic operation's result or a TF op's: a tensor or a number, not a list."""
        if isinstance(value, cst.BinaryOperation):
            return not isinstance(value.left, _CONTAINERS) and not isinstance(
                value.right, _CONTAINERS
            )
        if isinstance(value, cst.UnaryOperation):
            return not isinstance(value.operator, cst.Not)
        return isinstance(value, cst.Call) and self.tf_name(value.func) is not None

    # --- @tf.function and TF-only tensor methods

    def removed_decorator(self, decorator: cst.BaseExpression) -> bool:
        """`@tf.function`, `@tf.function(jit_compile=True, ...)` (keywords only) or
        `@tf.keras.utils.register_keras_serializable(...)`."""
        if self.tf_name(decorator) == "function":
            return True
        called = decorator.func if isinstance(decorator, cst.Call) else decorator
        if self.tf_name(called) == "function" and isinstance(decorator, cst.Call):
            return all(arg.keyword is not None for arg in decorator.args)
        return self.tf_name(called) in _REMOVED_DECORATORS

    def visit_Decorator(self, node: cst.Decorator) -> bool:
        """A removed decorator's arguments go with it (`input_signature=[tf.TensorSpec(...)]`)."""
        return not self.removed_decorator(node.decorator)

    def leave_Decorator(
        self, original_node: cst.Decorator, updated_node: cst.Decorator
    ) -> cst.Decorator | cst.RemovalSentinel:
        if not self.removed_decorator(original_node.decorator):
            return updated_node
        decorator = original_node.decorator
        shown = _dotted(decorator.func if isinstance(decorator, cst.Call) else decorator)
        self.translated(original_node, "@" + shown, "(removed)")
        for comment in _values(original_node, cst.Comment):  # kept, above the definition
            self.comment_above(comment)
        return cst.RemoveFromParent()

    def tensor_method(self, original: cst.Call, call: cst.Call) -> cst.BaseExpression | None:
        """`x.get_shape()` -> `x.shape`, `x.shape.as_list()` -> `list(x.shape)`: TF-only
        methods (eager shapes are fully known: ints in both)."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "set_shape":
            self.flag(
                original,
                ".set_shape()",
                "a TF-only shape assertion (eager shapes are known): check the shape with an "
                "`assert` or delete the call",
            )
            return None
        assigned = self.assignment(original, call)
        if assigned is not None:
            return assigned
        if call.args or not isinstance(func, cst.Attribute):
            return None
        if func.attr.value == "get_shape":
            result: cst.BaseExpression = cst.Attribute(func.value, cst.Name("shape"))
        elif (
            func.attr.value == "as_list"
            and isinstance(func.value, cst.Attribute)
            and func.value.attr.value == "shape"
        ):
            result = cst.Call(cst.Name("list"), [cst.Arg(func.value)])
        else:
            return None
        self.translated(original, f".{func.attr.value}()", _code(result))
        return result

    # --- calls: the table's rules, a tape's calls (`_statements`), TF-only tensor methods

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if id(original_node) in self.removed:
            return updated_node
        tape = self.tape_calls.get(id(original_node))
        if isinstance(tape, _tape.Tape):
            if tape.block.items[0].item is original_node:
                shown = _dotted(updated_node.func)
                self.translated(original_node, shown, "torch.enable_grad()")
                return updated_node
            return self.tape_gradient(original_node, updated_node, tape)
        if isinstance(tape, str):
            self.untranslated(original_node, _dotted(updated_node.func), tape)
            return updated_node
        name = self.tf_name(updated_node.func)
        if name is None:
            method = self.tensor_method(original_node, updated_node)
            if method is None:
                self.foreign_use(original_node, updated_node.func)
            return updated_node if method is None else method
        shown = _dotted(updated_node.func)
        rule = TABLE.get(name)
        if rule is None:
            self.untranslated(original_node, shown, _unknown(name))
            return updated_node
        if rule.params is None:  # a value: the call keeps its arguments
            self.translated(original_node, shown, rule.value)
            self.needed |= _roots(rule.value)
            given = {a.keyword.value for a in updated_node.args if a.keyword is not None}
            extra = [
                cst.Arg(
                    _parsed(value),
                    keyword=cst.Name(key),
                    equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                )
                for key, _, value in (d.partition("=") for d in rule.defaults)
                if key not in given
            ]
            return updated_node.with_changes(
                func=_parsed(rule.value), args=[*updated_node.args, *extra]
            )
        try:
            variant, args = _choose(
                rule, updated_node, id(original_node) in self.subscripted, self.ints()
            )
        except _Untranslated as why:
            self.untranslated(original_node, shown, str(why))
            return updated_node
        used = placeholders(variant.template)
        twice = sorted(p for p in set(used) if used.count(p) > 1 and not _simple(args[p]))
        result = _Fill(args, {p: self.fresh() for p in twice}).fill(variant.template)
        lost = [
            c for c in _values(updated_node, cst.Comment) if c not in _values(result, cst.Comment)
        ]
        for comment in lost:
            self.comment_above(comment)
        self.translated(original_node, shown, _code(result))
        self.needed |= _roots(variant.template)
        return self.in_place(original_node, result)

    def in_place(self, original: cst.CSTNode, result: cst.BaseExpression) -> cst.BaseExpression:
        """`result`, parenthesized unless it is an atom or stands where any expression can
        (an argument, an assigned or returned value, an element): `2 * tf.clip_by_norm(...)`
        must stay a product of the whole translation."""
        if isinstance(result, (*_ATOMS, cst.UnaryOperation)) or id(original) in self.whole:
            return result
        return _wrapped(result, ())

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self.skip.add(id(node.keyword))
        self.whole.add(id(node.value))

    def visit_Assign(self, node: cst.Assign) -> bool:
        self.whole.add(id(node.value))
        return not self.docstring_copy(node)

    def visit_Return(self, node: cst.Return) -> None:
        if node.value is not None:
            self.whole.add(id(node.value))

    def visit_Element(self, node: cst.Element) -> None:
        self.whole.add(id(node.value))
