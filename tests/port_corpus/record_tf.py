"""Record TensorFlow's numbers for a port corpus into its tf_reference.json.

Run with a Python that has TensorFlow (the tests themselves never need it):

    python tests/port_corpus/record_tf.py                         # this directory
    python tests/port_corpus/record_tf.py tests/port_corpus/wild  # another corpus

For each function of each corpus file's EXAMPLES, at float64 inputs (a list is a tensor,
`{"py": v}` a Python number, `{"tensor": v, "dtype": "float32"}` a tensor of another dtype), it
records the flattened outputs and their dtypes, the gradient of
`sum(output_i * upstream_i)` with respect to the tensor inputs and then the module's
tf.Variables (by name) and the trainable variables of its Keras layers and tf.Modules (by name,
each in its own order, read after the call, which builds a layer), and, where TensorFlow defines it, the second order: the gradient of
`sum(grad_j * vector_j)` through nested GradientTapes. The upstreams and vectors are recorded
too, so tests/test_port.py replays exactly the same computation in torch.

An EXAMPLES entry whose value is a dict is a Keras layer (or `tf.Module`) class of the file:
`{"init": [constructor args], "method": "name", "call": (call args,), "call_kwargs": {...},
"floatx": "float32"}` (all but "call" optional; without "method" the object itself is called).
A dict for a function, `{"call": (args,), "call_kwargs": {...}}`, calls it with those keyword
arguments (recorded as "kwargs").

Keras layers compute in the layer's "floatx", else the file's `KERAS_FLOATX`, else float64. The
layer is built by a first call, every variable it holds (a tf.Variable, or a Keras 3 variable
from `add_weight`) is then set to fixed values and recorded under its attribute path
(`"kernel"`, `"dense.kernel"` for Keras 3's `Dense._kernel`, read through its `kernel`
property: load the same values into the same attributes of the ported module), and the second call is recorded as a function's is, with
the layer's trainable weights, in attribute-path order, after the tensor inputs as sources.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent


def corpus(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.py") if p.name != Path(__file__).name)


def load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"tf_corpus_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pattern(shape: tuple[int, ...], offset: int) -> np.ndarray:
    """Fixed, distinct weights: 1 + 0.5 sin(k + offset) for the k-th element."""
    size = math.prod(shape)
    values = [1.0 + 0.5 * math.sin(k + offset) for k in range(size)]
    return np.array(values, dtype=np.float64).reshape(shape)


def as_list(value: Any) -> Any:
    return None if value is None else np.asarray(value).tolist()


def argument(spec: Any) -> Any:
    if isinstance(spec, dict) and "py" in spec:
        return spec["py"]
    if isinstance(spec, dict):
        return tf.constant(spec["tensor"], dtype=spec["dtype"])
    return tf.constant(spec, dtype=tf.float64)


def weights(obj: Any, prefix: str = "") -> dict[str, tf.Variable]:
    """The tf.Variables and Keras 3 variables `obj` holds, by attribute path, through nested
    layers and modules; `_kernel` is recorded as `kernel`, the public property reading it."""
    found: dict[str, tf.Variable] = {}
    for name, value in sorted(vars(obj).items()):
        if isinstance(value, (tf.Variable, tf.keras.Variable)):
            public = name.lstrip("_")
            shown = public if isinstance(getattr(type(obj), public, None), property) else name
            found.setdefault(prefix + shown, value)
        elif isinstance(value, (tf.keras.layers.Layer, tf.Module)) and name != "_parent":
            found.update(weights(value, f"{prefix}{name}."))
    return found


def record_layer(cls: Any, spec: dict[str, Any], floatx: str) -> dict[str, Any]:
    tf.keras.backend.set_floatx(spec.get("floatx", floatx))  # the dtype Keras layers compute in
    layer = cls(*spec.get("init", ()))
    call_kwargs = spec.get("call_kwargs", {})
    args = [argument(a) for a in spec["call"]]
    getattr(layer, spec.get("method", "__call__"))(*args, **call_kwargs)  # builds the weights
    held = weights(layer)
    for k, variable in enumerate(held.values()):
        dtype = getattr(variable.dtype, "name", variable.dtype)  # a Keras 3 dtype is a str
        variable.assign(pattern(tuple(variable.shape), 20 + k).astype(dtype))
    trainable = [path for path, v in held.items() if v.trainable]
    method = getattr(layer, spec["method"]) if "method" in spec else layer
    case = record(
        lambda *a: method(*a, **call_kwargs),
        tuple(spec["call"]),
        lambda: [held[p] for p in trainable],
    )
    case["weights"] = {path: as_list(v) for path, v in held.items()}
    case["trainable"] = trainable
    case["layer"] = {k: spec[k] for k in ("init", "method", "call_kwargs", "floatx") if k in spec}
    return case


def module_variables(module: Any) -> list[Any]:
    """The module's trainable tf.Variables, then its Keras layers' and tf.Modules'."""
    found: list[Any] = []
    for _, value in sorted(vars(module).items()):
        if isinstance(value, tf.Variable):
            found += [value] if value.trainable else []
        elif isinstance(value, (tf.keras.layers.Layer, tf.Module)):
            tracked = list(value.trainable_variables)
            raw = [  # Keras 3 does not track a tf.Variable attribute; TF's tape reads it
                v
                for v in vars(value).values()
                if isinstance(v, tf.Variable) and v.trainable and all(v is not t for t in tracked)
            ]
            found += tracked + raw
    return found


def record(
    fn: Any, spec: tuple[Any, ...], variables: Callable[[], list[tf.Variable]]
) -> dict[str, Any]:
    """Records `fn(*spec)`; `variables()`, read after the call (which builds a layer), are the
    sources after the tensor arguments."""
    args = [argument(a) for a in spec]
    tensors = [a for a in args if tf.is_tensor(a)]
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(tensors)
        with tf.GradientTape() as inner:
            inner.watch(tensors)
            flat = tf.nest.flatten(fn(*args))
            sources = [*tensors, *variables()]
            upstream = [
                pattern(tuple(f.shape), i) if f.dtype.is_floating else None
                for i, f in enumerate(flat)
            ]
            terms = [
                tf.cast(tf.reduce_sum(f * tf.cast(u, f.dtype)), tf.float64)
                for f, u in zip(flat, upstream, strict=True)
                if u is not None
            ]
            loss = tf.add_n(terms) if terms else None
        grads = inner.gradient(loss, sources) if loss is not None else [None for _ in sources]
        grads = [  # tf.gather's gradient is sparse
            tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads
        ]
        vectors = [pattern(tuple(s.shape), 10 + j) for j, s in enumerate(sources)]
        second_terms = [
            tf.cast(tf.reduce_sum(g * tf.cast(v, g.dtype)), tf.float64)
            for g, v in zip(grads, vectors, strict=True)
            if g is not None
        ]
        target = tf.add_n(second_terms) if second_terms else None  # recorded by `outer` too
    second: list[Any] | None = None
    if target is not None:
        try:
            second = [as_list(g) for g in outer.gradient(target, sources)]
        except (LookupError, NotImplementedError, ValueError) as error:
            print(f"  no second order: {type(error).__name__}: {error}".splitlines()[0])
    return {
        "args": list(spec),
        "outputs": [as_list(f) for f in flat],
        "dtypes": [f.dtype.name for f in flat],
        "upstream": [as_list(u) for u in upstream],
        "grads": [as_list(g) for g in grads],
        "vectors": [as_list(v) for v in vectors],
        "second": second,
    }


def main(argv: list[str]) -> int:
    directory = Path(argv[0]).resolve() if argv else HERE
    reference: dict[str, Any] = {"tensorflow": tf.__version__, "files": {}}
    for path in corpus(directory):
        module = load(path)
        functions = {}
        floatx = getattr(module, "KERAS_FLOATX", "float64")

        def variables(module: Any = module) -> list[Any]:
            return module_variables(module)

        for name, spec in module.EXAMPLES.items():
            print(f"{path.name}: {name}")
            tf.keras.backend.set_floatx(floatx)
            target = getattr(module, name)
            if isinstance(spec, dict) and isinstance(target, type):
                functions[name] = record_layer(target, spec, floatx)
            elif isinstance(spec, dict):  # a function called with keyword arguments
                kwargs = spec["call_kwargs"]
                call = functools.partial(target, **kwargs)
                functions[name] = {**record(call, tuple(spec["call"]), variables), "kwargs": kwargs}
            else:
                functions[name] = record(target, spec, variables)
        reference["files"][path.name] = functions
    output = directory / "tf_reference.json"
    output.write_text(json.dumps(reference, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
