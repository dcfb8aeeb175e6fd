"""Read TensorFlow's public op names into tf_compat_grad/_port/tf_names.json (data: the tests
and the translator never need TensorFlow).

    /path/to/python-with-tensorflow .ci/port_tf_names.py

It writes `PUBLIC_OPS`, the functions of `tf.math`, `tf.nn` and TensorFlow's array and
reduction ops (the top-level functions defined in `array_ops`, `math_ops`, `clip_ops` and their
generated kernels), against which the guide measures the table's coverage, and `V1_NAMES`: for
each function of `tf.compat.v1` (and its `math`, `nn`, `linalg`) that is a v2 function or has
a v2 namesake, that v2 name, whether it is the same function, and the v1 parameter order (so
positional arguments bind as in TF1); and `INTERNAL_NAMES`: for each function or dtype of
TensorFlow's common internal modules (`tensorflow.python.ops.math_ops`, `...framework.ops`) that
is a public one, that public name (a v2 name, else `compat.v1.NAME`), with no parameters; and
the few internal functions that the public one calls with the same arguments (`_SAME_CALL`),
with their own parameters (a positional argument binds as the internal function binds it).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import tensorflow as tf

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "tf_compat_grad" / "_port" / "tf_names.json"
_ARRAY_AND_REDUCTION = (
    "array_ops",
    "array_ops_stack",
    "math_ops",
    "manip_ops",
    "gen_array_ops",
    "gen_math_ops",
    "clip_ops",
    "special_math_ops",
)
_NAMESPACES = ("", "math.", "nn.", "linalg.", "random.")
_INTERNAL_MODULES = (
    *(
        f"tensorflow.python.ops.{m}"
        for m in (
            "array_ops",
            "array_ops_stack",
            "check_ops",
            "clip_ops",
            "control_flow_ops",
            "custom_gradient",
            "gen_array_ops",
            "gen_math_ops",
            "gen_nn_ops",
            "linalg_ops",
            "math_ops",
            "nn",
            "nn_impl",
            "nn_ops",
            "random_ops",
            "special_math_ops",
            "while_loop",
        )
    ),
    *(f"tensorflow.python.framework.{m}" for m in ("constant_op", "dtypes", "ops")),
)
# internal function -> the public function that is only a call of it with the same arguments
# (`tf.convert_to_tensor(value, dtype, dtype_hint, name)` returns
# `tensor_conversion_registry.convert(value, dtype, name, preferred_dtype=dtype_hint)`, which is
# `ops.convert_to_tensor(value, dtype, name, dtype_hint=dtype_hint)`).
_SAME_CALL = {"python.framework.ops.convert_to_tensor": "convert_to_tensor"}


def resolve(module: Any, name: str) -> Any:
    for part in name.split("."):
        module = getattr(module, part, None)
        if module is None:
            return None
    return module


def is_function(obj: Any) -> bool:
    return callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj)


def public_ops() -> list[str]:
    names = []
    for prefix in ("math", "nn"):
        module = getattr(tf, prefix)
        names += [
            f"{prefix}.{n}"
            for n in dir(module)
            if not n.startswith("_") and is_function(getattr(module, n))
        ]
    for n in dir(tf):
        obj = getattr(tf, n)
        if n.startswith("_") or not is_function(obj):
            continue
        module = getattr(inspect.unwrap(obj), "__module__", "") or ""
        if module.rsplit(".", 1)[-1] in _ARRAY_AND_REDUCTION:
            names.append(n)
    return sorted(set(names))


def parameters(obj: Any) -> list[str] | None:
    try:
        return list(inspect.signature(obj).parameters)
    except (TypeError, ValueError):
        return None


def functions(root: Any) -> dict[str, Any]:
    found = {}
    for prefix in _NAMESPACES:
        module = resolve(root, prefix[:-1]) if prefix else root
        for n in dir(module):
            obj = getattr(module, n)
            if not n.startswith("_") and is_function(obj):
                found[prefix + n] = obj
    return found


def v1_names() -> dict[str, tuple[str, bool, tuple[str, ...]]]:
    """v1 name -> (the v2 name of the same function, or of the same name; whether it is the
    same function; the v1 parameters)."""
    v2 = functions(tf)
    by_object: dict[int, str] = {}
    for name, obj in sorted(v2.items(), key=lambda item: (item[0].count("."), item[0])):
        by_object.setdefault(id(obj), name)
        by_object.setdefault(id(inspect.unwrap(obj)), name)  # behind a deprecation wrapper
    found = {}
    for name, obj in functions(tf.compat.v1).items():
        params = parameters(obj)
        if params is None:
            continue
        same = by_object.get(id(obj), by_object.get(id(inspect.unwrap(obj))))
        if name in v2 and v2[name] is obj:
            found[name] = (name, True, tuple(params))
        elif same is not None and (
            obj is v2[same] or parameters(v2[same]) == params
        ):  # the same function, or a wrapper of it that takes the same arguments
            found[name] = (same, True, tuple(params))
        elif name in v2:
            found[name] = (name, False, tuple(params))
    return found


def internal_names() -> dict[str, tuple[str, list[str] | None]]:
    """internal name (`python.ops.math_ops.sigmoid`) -> (the public name of the same function or
    dtype, None), or (the public name, the internal parameters) for those of `_SAME_CALL`."""
    public: dict[int, str] = {}
    for name, obj in sorted(functions(tf).items(), key=lambda i: (i[0].count("."), i[0])):
        public.setdefault(id(obj), name)
    for name in dir(tf.dtypes):
        if isinstance(getattr(tf.dtypes, name), tf.dtypes.DType):
            public.setdefault(id(getattr(tf.dtypes, name)), name)
    for name, obj in sorted(functions(tf.compat.v1).items()):
        public.setdefault(id(obj), "compat.v1." + name)
    found: dict[str, tuple[str, list[str] | None]] = {}
    for module_name in _INTERNAL_MODULES:
        module = importlib.import_module(module_name)
        short = module_name.removeprefix("tensorflow.")
        for name in dir(module):
            if not name.startswith("_") and id(getattr(module, name)) in public:
                found[f"{short}.{name}"] = (public[id(getattr(module, name))], None)
    for name, target in _SAME_CALL.items():
        module_name, _, function = name.rpartition(".")
        internal = getattr(importlib.import_module("tensorflow." + module_name), function)
        found[name] = (target, parameters(internal))
    return found


def main() -> int:
    ops = public_ops()
    v1 = v1_names()
    internal = internal_names()
    lines = ["{", f' "tensorflow": {json.dumps(tf.__version__)},', ' "public_ops": [']
    lines += [f"  {json.dumps(n)}," for n in ops]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" ],", ' "v1_names": {']
    lines += [f"  {json.dumps(n)}: {json.dumps(list(v))}," for n, v in sorted(v1.items())]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" },", ' "internal_names": {']
    lines += [f"  {json.dumps(n)}: {json.dumps(list(v))}," for n, v in sorted(internal.items())]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" }", "}", ""]
    OUTPUT.write_text("\n".join(lines), encoding="utf-8")
    print(
        f"wrote {OUTPUT}: {len(ops)} public ops, {len(v1)} tf.compat.v1 names, "
        f"{len(internal)} internal names"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
