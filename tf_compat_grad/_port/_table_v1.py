"""`tensorflow.compat.v1`: its names whose function is a table name's (`tf.compat.v1.log` is
`tf.math.log`), the rules derived for its functions that take the same arguments under another
order (`tf.compat.v1.transpose(a, perm, name, conjugate)`), and the TF1-only API (sessions,
placeholders, variable scopes), flagged with the reason. TF1's names and signatures are data
read from TensorFlow by .ci/port_tf_names.py (`_tf_names`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ._rule import Rule, _flagged, _v
from ._table_tensors import DTYPES
from ._tf_names import V1_NAMES

# Same arguments, other semantics in TF1: flagged with the difference.
_SEMANTICS_DIFFER = {
    "nn.softmax_cross_entropy_with_logits": "TF1's version passes no gradient to the labels",
}
# TF1's own functions with their own translation.
_V1_RULES = (
    *(
        Rule(
            (f"compat.v1.to_{name}",),
            ("x", "name"),
            (_v(f"torch.as_tensor({{x}}).to(torch.{dtype})"),),
            note=f"`tf.cast(x, tf.{dtype})`.",
        )
        for name, dtype in (
            ("float", "float32"),
            ("double", "float64"),
            ("int32", "int32"),
            ("int64", "int64"),
            ("bfloat16", "bfloat16"),
            ("complex64", "complex64"),
        )
    ),
    Rule(
        ("compat.v1.div",),
        ("x", "y", "name"),
        (_v("tf_ops.div_v1({x}, {y})"),),
        note="Python 2's division: floor division for integers, true division for floats.",
    ),
    Rule(
        ("compat.v1.where",),
        ("condition", "x", "y", "name"),
        (
            _v("tf_ops.where_v1({condition}, {x}, {y})"),
            _v("torch.nonzero({condition})"),
        ),
        note="TF1's `where` does not broadcast: a vector condition picks rows of x and y.",
    ),
)
# Names that are not functions and mean the same in TF1 (dtypes, classes, constants).
_SAME_VALUES = (
    "Tensor",
    "Variable",
    "GradientTape",
    "newaxis",
    "Module",
    "keras",
    "half",
    "double",
)

_GRAPH_MODE = (
    "TF1 graph-mode API (sessions, placeholders, variable scopes, collections): it has no "
    "eager counterpart; the function it builds is an ordinary function of its inputs in torch, "
    "rewrite this part by hand"
)
V1_ONLY = _flagged(
    tuple(
        "compat.v1." + name
        for name in (
            "Session",
            "InteractiveSession",
            "placeholder",
            "placeholder_with_default",
            "sparse_placeholder",
            "variable_scope",
            "get_variable",
            "get_local_variable",
            "global_variables_initializer",
            "local_variables_initializer",
            "variables_initializer",
            "initialize_all_variables",
            "global_variables",
            "trainable_variables",
            "get_collection",
            "add_to_collection",
            "GraphKeys",
            "get_default_graph",
            "reset_default_graph",
            "Graph",
            "AUTO_REUSE",
            "assign",
            "assign_add",
            "ConfigProto",
        )
    ),
    _GRAPH_MODE,
)


# Calls that switch TF between graph and eager execution: as statements they are removed (torch
# runs eagerly; the ops compute the same numbers in both modes, and sessions are flagged).
MODE_SWITCHES = frozenset(
    {
        "compat.v1.disable_v2_behavior",
        "compat.v1.enable_v2_behavior",
        "compat.v1.disable_eager_execution",
        "compat.v1.enable_eager_execution",
        "compat.v1.enable_resource_variables",
        "config.run_functions_eagerly",
    }
)


# Context managers that only name the ops built inside them: a `with` of one (without `as`) is
# replaced by its body. A `tf.compat.v1.get_variable` inside a variable scope stays flagged.
NAME_SCOPES = frozenset(
    {"name_scope", "compat.v1.name_scope", "compat.v1.variable_scope", "keras.backend.name_scope"}
)


def v1_aliases(table: Mapping[str, Rule]) -> dict[str, str]:
    """TF1 name -> the table name of the same function or value."""
    found = {name: name for name in (*_SAME_VALUES, *DTYPES) if name in table}
    for name, (target, same, _) in V1_NAMES.items():
        if same and target in table:
            found[name] = target
    return found


def v1_rules(table: Mapping[str, Rule]) -> list[Rule]:
    """Rules for TF1's own functions that take a table function's arguments (by name; a
    parameter TF1 names otherwise at the same position, `tensor` for `input`, counts as it),
    less those with a rule of their own or other semantics."""
    flagged = [_flagged(("compat.v1." + n,), why) for n, why in _SEMANTICS_DIFFER.items()]
    rules = [V1_ONLY, *_V1_RULES, *flagged]
    own = {name for rule in rules for name in rule.names}
    for name, (target, same, params) in sorted(V1_NAMES.items()):
        rule = table.get(target)
        if same or rule is None or rule.params is None or "compat.v1." + name in own:
            continue
        ours = list(params)
        for i, param in enumerate(ours):
            if param not in rule.params and i < len(rule.params) and rule.params[i] not in ours:
                ours[i] = rule.params[i]
        if not set(rule.params) - {"name"} <= set(ours):
            continue
        rules.append(dataclasses.replace(rule, names=("compat.v1." + name,), params=tuple(ours)))
    return rules
