"""TensorFlow 2.21's public op names (`PUBLIC_OPS`: `tf.math`, `tf.nn`, the array and
reduction ops), `tf.compat.v1`'s functions (`V1_NAMES`: v1 name -> the v2 name of the same
function or of the same name, whether it is the same function, the v1 parameters) and the
public functions and dtypes of TensorFlow's internal modules (`INTERNAL_NAMES`:
`python.ops.math_ops.sigmoid` -> `sigmoid`, and the internal parameters where the internal
function is not the public one but what it calls), data read from TensorFlow by
.ci/port_tf_names.py into tf_names.json."""

from __future__ import annotations

import json
from pathlib import Path

_DATA = json.loads(Path(__file__).with_name("tf_names.json").read_text(encoding="utf-8"))

PUBLIC_OPS: tuple[str, ...] = tuple(_DATA["public_ops"])
V1_NAMES: dict[str, tuple[str, bool, tuple[str, ...]]] = {
    name: (target, same, tuple(params))
    for name, (target, same, params) in _DATA["v1_names"].items()
}
INTERNAL_NAMES: dict[str, tuple[str, tuple[str, ...] | None]] = {
    name: (target, None if params is None else tuple(params))
    for name, (target, params) in _DATA["internal_names"].items()
}
