"""TensorFlow's internal modules (`from tensorflow.python.ops import math_ops`,
`from tensorflow.python.framework import ops`), as TensorFlow's own code and tests write them:
each internal function or dtype that is a public one (`math_ops.sigmoid` is `tf.sigmoid`) gets
that name's rule, under its internal name; the few internal functions the public one only calls
with the same arguments (`ops.convert_to_tensor`) get it with their own parameters. The names
are data read from TensorFlow by .ci/port_tf_names.py (`_tf_names`); any other internal name is
flagged as not in the table."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ._rule import Rule
from ._tf_names import INTERNAL_NAMES


def internal_rules(table: Mapping[str, Rule], v1_aliases: Mapping[str, str]) -> list[Rule]:
    """A rule for each internal name whose public name has one (a `compat.v1.NAME` through
    `v1_aliases`, as `_imports.tf_name` reads it)."""
    rules = []
    for name, (target, params) in sorted(INTERNAL_NAMES.items()):
        if target not in table and target.startswith("compat.v1."):
            target = v1_aliases.get(target.removeprefix("compat.v1."), target)
        rule = table.get(target)
        if rule is None:
            continue
        if params is not None:  # the internal function's own parameter order
            if rule.params is None or not set(rule.params) <= set(params):
                continue
            rule = dataclasses.replace(rule, params=params)
        rules.append(dataclasses.replace(rule, names=(name,)))
    return rules
