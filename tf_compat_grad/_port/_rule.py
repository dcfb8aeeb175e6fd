"""The data type of the translation table (`_table`): `Rule` and `Variant`, the builders that
make the common rules, and `placeholders`, the `{param}`s of a template.

A rule is data. A call `tf.NAME(...)` has its arguments bound to `params` (TensorFlow's
parameter order, so positional arguments land where TensorFlow puts them); the first `Variant`
whose template uses exactly the arguments given (less those in `drop` and the literal booleans
of `flags`) and whose `when` facts all hold is instantiated, with each `{param}` replaced by the
argument's (already translated) source. A call no variant fits is left as it is and flagged with
`otherwise`. A rule without `params` names a value: `tf.NAME` becomes `value`, and a call of it
keeps its arguments, plus its `defaults` not given (`data_format="channels_last"` for Keras's
`Conv2D`, whose layout the port writes out).

The facts a variant can require, besides which arguments are given:

- `P=True` / `P=False`: the flag P is that literal (a literal equal to its default counts as
  not given; a flag that is not a literal is flagged);
- `P=TEXT`: the string parameter P (of `strings`) is the literal 'TEXT', not its default;
- `P:number`: P is a literal number (`2`, `-0.5`);
- `P:literal`: P is a literal number or a nested list/tuple of them;
- `P:ints`: P is a literal int or a nested list/tuple of literal ints only;
- `P:axes`: P is a literal int or a non-empty list/tuple of literal ints;
- `P:axis`: P is a literal int;
- `P:size`: P is an indexed `.shape` (a Python int in torch), as `tf.shape(x)[0]` becomes;
- `P:intlike`: P is a Python int in both frameworks' eyes: a literal int, an indexed `.shape`,
  `len(...)`, or `+`, `-`, `*` of those;
- `P:nonzero`: P is a literal number other than 0;
- `P:name`: P is a name (a variable: its value is known at run time only);
- `subscripted`: the call is indexed, as in `tf.shape(x)[0]`, or is the shape argument of
  `tf.reshape`, `tf.ones`, `tf.zeros`, `tf.fill` (where a `torch.Size` serves as well).

A flag named in `dynamic` may also be an expression (a Python bool at run time); it is then an
ordinary argument, used by the variants that have its placeholder.

An argument a template uses more than once is evaluated once: when it is not a name or a
number, its first use becomes an assignment expression, `(_t1 := ...)`, and the others `_t1`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    """One translation: a Python expression with `{param}` placeholders, and the facts it needs."""

    template: str
    when: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Rule:
    names: tuple[str, ...]  # relative to the tensorflow module: "reduce_sum", "math.reduce_sum"
    params: tuple[str, ...] | None = None  # TensorFlow's parameter order; None: a value
    variants: tuple[Variant, ...] = ()
    value: str = ""  # the translation of the bare name (a value rule, or a function passed along)
    flags: Mapping[str, bool] = field(default_factory=dict)  # literal booleans and their defaults
    dynamic: tuple[str, ...] = ()  # flags that may also be an expression, then a `{placeholder}`
    strings: Mapping[str, str] = field(default_factory=dict)  # literal strings and their defaults
    drop: tuple[str, ...] = ("name",)  # arguments without effect in torch
    refuse: Mapping[str, str] = field(default_factory=dict)  # fact -> why it is not translated
    note: str = ""  # semantics worth knowing, in the guide
    otherwise: str = ""  # why a call that no variant fits is left untranslated
    defaults: tuple[str, ...] = ()  # `keyword=value`s a value rule's call writes out if not given


def _v(template: str, *when: str) -> Variant:
    return Variant(template, frozenset(when))


def _unary(names: tuple[str, ...], param: str, target: str, note: str = "") -> Rule:
    """An elementwise function with the same semantics (gradient included) under both names."""
    return Rule(names, (param, "name"), (_v(f"{target}({{{param}}})"),), value=target, note=note)


def _reduction(name: str, target: str, note: str) -> Rule:
    """`tf.reduce_*`: `axis` -> `dim` for literal ints, `keepdims` -> `keepdim`, no axis: over
    all elements; an axis known at run time only (a name, `list(range(1, n))`) goes to
    `tf_ops.reduce_*`, where an empty list reduces nothing, as in TF (torch: everything)."""
    x = "{input_tensor}"
    helper = f"tf_ops.reduce_{name}"
    return Rule(
        (f"reduce_{name}", f"math.reduce_{name}"),
        ("input_tensor", "axis", "keepdims", "name"),
        (
            _v(f"{target}({x}, dim={{axis}}, keepdim=True)", "keepdims=True", "axis:axes"),
            _v(f"{target}({x}, dim=None, keepdim=True)", "keepdims=True"),
            _v(f"{target}({x}, dim={{axis}}, keepdim={{keepdims}})", "axis:axes"),
            _v(f"{target}({x}, dim=None, keepdim={{keepdims}})"),
            _v(f"{target}({x}, dim={{axis}})", "axis:axes"),
            _v(f"{target}({x})"),
            _v(f"{helper}({x}, {{axis}}, keepdims=True)", "keepdims=True"),
            _v(f"{helper}({x}, {{axis}}, keepdims={{keepdims}})"),
            _v(f"{helper}({x}, {{axis}})"),
        ),
        flags={"keepdims": False},
        dynamic=("keepdims",),
        note=note,
        otherwise="`axis` must not be an empty literal list",
    )


def _activation(names: tuple[str, ...], target: str, note: str = "") -> Rule:
    return Rule(names, ("features", "name"), (_v(f"{target}({{features}})"),), note=note)


def _like(name: str) -> Rule:
    return Rule(
        (name,),
        ("input", "dtype", "name"),
        (
            _v(
                f"torch.{name}(tf_ops.convert_to_tensor({{input}}), dtype={{dtype}})",
                "input:number",
            ),
            _v(f"torch.{name}(tf_ops.convert_to_tensor({{input}}))", "input:number"),
            _v(f"torch.{name}({{input}}, dtype={{dtype}})"),
            _v(f"torch.{name}({{input}})"),
        ),
        note="A Python number gets TF's dtype (int32, float32) through `tf_ops.convert_to_tensor`.",
    )


def _dtype(tf_name: str, torch_name: str = "") -> Rule:
    """`tf.NAME` and `tf.dtypes.NAME`."""
    return Rule((tf_name, f"dtypes.{tf_name}"), value=f"torch.{torch_name or tf_name}")


def _flagged(names: tuple[str, ...], why: str) -> Rule:
    return Rule(names, (), otherwise=why)


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def placeholders(template: str) -> list[str]:
    """The parameters a template uses, once per use.

    >>> placeholders("torch.clamp({x}, min={y})")
    ['x', 'y']
    """
    return _PLACEHOLDER.findall(template)
