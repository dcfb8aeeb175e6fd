"""Record TensorFlow's numbers for the port corpus into tf_reference.json.

Run with a Python that has TensorFlow (the tests themselves never need it):

    python tests/port_corpus/record_tf.py

For each function of each corpus file's EXAMPLES, at float64 inputs (a list is a tensor,
`{"py": v}` a Python number), it records the flattened outputs and their dtypes, the gradient of
`sum(output_i * upstream_i)` with respect to the tensor inputs and then the module's
tf.Variables (by name) and the trainable variables of its Keras layers and tf.Modules (by name,
each in its own order, read after the call, which builds a layer), and, where TensorFlow defines it, the second order: the gradient of
`sum(grad_j * vector_j)` through nested GradientTapes. The upstreams and vectors are recorded
too, so tests/test_port.py replays exactly the same computation in torch.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "tf_reference.json"


def corpus() -> list[Path]:
    return sorted(p for p in HERE.glob("*.py") if p.name != Path(__file__).name)


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


def record(fn: Any, spec: tuple[Any, ...], module: Any) -> dict[str, Any]:
    args = [a["py"] if isinstance(a, dict) else tf.constant(a, dtype=tf.float64) for a in spec]
    tensors = [a for a in args if tf.is_tensor(a)]
    with tf.GradientTape(persistent=True) as outer:
        outer.watch(tensors)
        with tf.GradientTape() as inner:
            inner.watch(tensors)
            flat = tf.nest.flatten(fn(*args))
            sources = [*tensors, *module_variables(module)]
            upstream = [
                pattern(tuple(f.shape), i) if f.dtype.is_floating else None
                for i, f in enumerate(flat)
            ]
            terms = [
                tf.cast(tf.reduce_sum(f * u), tf.float64)
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
            tf.reduce_sum(g * v) for g, v in zip(grads, vectors, strict=True) if g is not None
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


def main() -> int:
    reference: dict[str, Any] = {"tensorflow": tf.__version__, "files": {}}
    for path in corpus():
        module = load(path)
        functions = {}
        for name, spec in module.EXAMPLES.items():
            print(f"{path.name}: {name}")
            functions[name] = record(getattr(module, name), spec, module)
        reference["files"][path.name] = functions
    OUTPUT.write_text(json.dumps(reference, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
