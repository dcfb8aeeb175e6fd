"""`python -m tf_compat_grad port`: translations proved numerically against TensorFlow.

Each file of tests/port_corpus is TensorFlow source; it is ported with `port_source`, executed
with torch, and its outputs, gradients and second-order gradients are compared with the numbers
TensorFlow 2.21 gave for the same computation (tests/port_corpus/tf_reference.json, written by
tests/port_corpus/record_tf.py). TensorFlow itself is not needed here.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("libcst")

from helpers import flatten

from tf_compat_grad import _cli, tf_ops
from tf_compat_grad._port._table import RULES, with_guide_table
from tf_compat_grad.port import MARK, PortResult, port_source

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "port_corpus"
REFERENCE = json.loads((CORPUS / "tf_reference.json").read_text(encoding="utf-8"))
CASES = [(file, name) for file, functions in REFERENCE["files"].items() for name in functions]
RTOL, ATOL = 1e-10, 1e-12


@functools.cache
def ported(file: str) -> tuple[PortResult, types.ModuleType]:
    result = port_source((CORPUS / file).read_text(encoding="utf-8"), file)
    module = types.ModuleType(f"ported_{Path(file).stem}")
    exec(compile(result.code, f"<ported {file}>", "exec"), module.__dict__)
    return result, module


def module_parameters(module: types.ModuleType) -> list[nn.Parameter]:
    """As record_tf.py's `module_variables`: the module's Parameters, then its layers' (by name)."""
    found: list[nn.Parameter] = []
    for _, value in sorted(vars(module).items()):
        if isinstance(value, nn.Parameter):
            found.append(value)
        elif isinstance(value, nn.Module):
            found.extend(value.parameters())
    return [p for p in found if p.requires_grad]  # TF's trainable variables


def assert_matches(
    actual: torch.Tensor | None, expected: Any, what: str, differs: list[int] | None = None
) -> None:
    if differs is not None:  # a known difference: exactly these elements differ
        assert actual is not None and expected is not None
        want = torch.tensor(expected, dtype=actual.dtype)
        same = torch.isclose(actual.detach(), want, rtol=RTOL, atol=ATOL, equal_nan=True)
        found = torch.nonzero(~same.flatten()).flatten().tolist()
        assert found == differs, f"{what}: torch {actual}, TF {want}: update KNOWN_DIFFERENCES"
        return
    if expected is None:  # TF: no gradient, which is a zero gradient
        assert actual is None or not actual.any(), f"{what}: TF has no gradient, torch {actual}"
        return
    assert actual is not None, f"{what}: torch has no gradient, TF {expected}"
    want = torch.tensor(expected, dtype=actual.dtype)
    torch.testing.assert_close(
        actual.detach(), want, rtol=RTOL, atol=ATOL, equal_nan=True, msg=lambda m: f"{what}: {m}"
    )


# Where TF's own gradient rules and torch's differ, not the port (the table's notes say so):
# (file, function, which gradient) -> (why, the flat indices of the elements that differ).
# The test checks that exactly these elements differ and that every other one matches.
KNOWN_DIFFERENCES = {
    ("custom_norm.py", "safe_norm", "second-order gradient 0"): (
        "tf.sqrt at 0 with a zero upstream: TF's gradient is 0 (its SqrtGrad returns 0 for a "
        "zero upstream), torch's NaN (0 * inf)",
        [2, 3],
    ),
    ("safe_sqrt.py", "safe_sqrt", "second-order gradient 0"): ("the same tf.sqrt at 0", [0]),
    ("capsule_norm.py", "norm_with_safe_grad", "second-order gradient 0"): (
        "the same tf.sqrt at 0 (tf.norm of the zero vector)",
        [2, 3],
    ),
    ("ops.py", "reduce_prod_with_zero", "second-order gradient 0"): (
        "reduce_prod's second derivative at the zeros of a slice: TF gives 0, torch the true "
        "value (products of the other elements)",
        [2, 4, 5],
    ),
    ("ops.py", "maximum_nan", "gradient 0"): (
        "the gradient at a NaN x goes to y in TF (x >= y is false), to x here",
        [0],
    ),
    ("ops.py", "maximum_nan", "gradient 1"): ("the same, seen from y", [0]),
}


@pytest.mark.parametrize(("file", "name"), CASES, ids=[f"{f}::{n}" for f, n in CASES])
def test_port_matches_tensorflow(file: str, name: str) -> None:
    """The ported function gives TF's outputs, gradients and second-order gradients."""
    case = REFERENCE["files"][file][name]
    _, module = ported(file)
    args = [
        a["py"] if isinstance(a, dict) else torch.tensor(a, dtype=torch.float64, requires_grad=True)
        for a in case["args"]
    ]
    tensors = [a for a in args if isinstance(a, torch.Tensor)]

    outputs = flatten(getattr(module, name)(*args))
    sources = [*tensors, *module_parameters(module)]  # after the call, which builds a layer
    assert len(outputs) == len(case["outputs"])
    for i, (output, expected) in enumerate(zip(outputs, case["outputs"], strict=True)):
        assert_matches(output, expected, f"output {i}")
    assert [str(o.dtype).removeprefix("torch.") for o in outputs] == case["dtypes"]

    terms = [
        (o * torch.tensor(u, dtype=torch.float64)).sum()
        for o, u in zip(outputs, case["upstream"], strict=True)
        if u is not None and o.requires_grad
    ]
    if not terms:  # no output depends on the inputs (integer outputs, constants)
        assert all(g is None for g in case["grads"])
        return
    grads = torch.autograd.grad(sum(terms), sources, allow_unused=True, create_graph=True)
    for j, (grad, expected) in enumerate(zip(grads, case["grads"], strict=True)):
        what = f"gradient {j}"
        assert_matches(
            grad, expected, what, KNOWN_DIFFERENCES.get((file, name, what), ("", None))[1]
        )

    if case["second"] is None:
        return
    terms = [
        (g * torch.tensor(v, dtype=torch.float64)).sum()
        for g, v in zip(grads, case["vectors"], strict=True)
        if g is not None and g.requires_grad
    ]
    if terms:
        second = torch.autograd.grad(sum(terms), sources, allow_unused=True)
    else:  # the gradient does not depend on the inputs
        second = tuple(None for _ in sources)
    for j, (grad, expected) in enumerate(zip(second, case["second"], strict=True)):
        what = f"second-order gradient {j}"
        assert_matches(
            grad, expected, what, KNOWN_DIFFERENCES.get((file, name, what), ("", None))[1]
        )


@pytest.mark.parametrize("file", sorted(REFERENCE["files"]))
def test_corpus_ports_completely(file: str) -> None:
    result, module = ported(file)
    assert not result.flagged, result.text(file)
    assert "import tensorflow" not in result.code and "tf" not in vars(module)
    assert MARK not in result.code


def test_corpus_covers_the_patterns_and_every_recorded_function() -> None:
    custom = [(f, n) for f, n in CASES if f != "ops.py"]
    assert len(custom) >= 45
    recorded = {p.name for p in CORPUS.glob("*.py")} - {"record_tf.py"}
    assert recorded == set(REFERENCE["files"]), "re-record: tests/port_corpus/record_tf.py"


def test_variables_grad_fn_signature_kept() -> None:
    result, _ = ported("variable_read.py")
    assert "def grad_fn(dpoly, variables):" in result.code
    assert "weights = nn.Parameter(torch.tensor([0.5, -1.5], dtype=torch.float64))" in result.code
    assert "from torch import nn" in result.code


UNTRANSLATABLE = """\
import tensorflow as tf


def train_step(x, axis, a, b, n):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = tf.foo(x)
    q = tf.math.truncatediv(n, 2)
    z = tf.nn.conv3d(x, x, strides=1, padding="SAME")
    s = tf.nn.softmax(x, axis=axis[0])
    c = tf.constant(n, shape=[2])
    d = tf.clip_by_norm(a + b, 1.0)  # a + b evaluated once
    m = tf.matmul(a, b, adjoint_a=True) + tf.pad(a, [[1, 1]], mode="REFLECT")
    e = tf.nn.softmax(x, axis=n)
    f = tf.range
    g = tf.exp(x)
    return tape.gradient(y, x), q, z, s, c, d, m, e, f(x), g, tf.shape(x) * 2
"""


def test_untranslatable_constructs_are_flagged_at_their_line() -> None:
    result = port_source(UNTRANSLATABLE, "step.py")
    flagged = {(e.line, e.tf) for e in result.flagged}
    assert flagged == {
        (1, "import tensorflow as tf"),
        (5, "tf.GradientTape"),
        (7, "tf.foo"),
        (8, "tf.math.truncatediv"),
        (9, "tf.nn.conv3d"),
        (11, "tf.constant"),
        (13, "tf.matmul"),
        (13, "tf.pad"),
        (15, "tf.range"),
        (17, "tape.gradient"),
    }
    why = {e.tf + str(e.line): e.why for e in result.flagged}
    assert "watch_accessed_variables" in why["tf.GradientTape5"]
    assert "no gradient" in why["tf.math.truncatediv8"]
    assert "NHWC" in why["tf.nn.conv3d9"]
    assert "`shape`" in why["tf.constant11"]
    assert "adjoint_a" in why["tf.matmul13"]
    assert "CONSTANT mode" in why["tf.pad13"]
    assert "used as a value" in why["tf.range15"]
    assert "untranslated tape of line 5" in why["tape.gradient17"]
    # Each untranslated line keeps its TF code, under a comment saying why.
    lines = result.code.splitlines()
    for code in ("y = tf.foo(x)", "q = tf.math.truncatediv(n, 2)", "f = tf.range"):
        index = next(i for i, line in enumerate(lines) if line.strip() == code)
        assert lines[index - 1].strip().startswith(MARK), lines[index - 1]
    # An axis known at run time only goes to the helper, which takes None as the last axis.
    stripped = [line.strip() for line in lines]
    assert "s = tf_ops.softmax(x, axis[0])" in stripped and "e = tf_ops.softmax(x, n)" in stripped
    # The import stays, since untranslated uses remain; the translated ones need torch.
    assert "import torch\n" in result.code and "\nimport tensorflow as tf\n" in result.code
    text = result.text("step.py")
    assert "NOT TRANSLATED" in text and "train_step" in text
    compile(result.code, "step.py", "exec")  # the comments leave valid Python


def test_name_scopes_and_summaries_are_removed_and_a_scoped_get_variable_stays_flagged() -> None:
    source = textwrap.dedent(
        """\
        import tensorflow.compat.v1 as tf
        from keras.src.saving import register_keras_serializable


        @register_keras_serializable(package="Custom")
        def f(x):
            with tf.variable_scope("F"):
                y = tf.exp(x)
                tf.summary.histogram("y", y)
            with tf.name_scope("G"):
                return y * 2
        """
    )
    result = port_source(source, "scopes.py")
    assert not result.flagged, result.text("scopes.py")
    assert "with" not in result.code and "summary" not in result.code
    assert "register_keras_serializable" not in result.code
    namespace: dict[str, Any] = {}
    exec(result.code, namespace)
    x = torch.tensor([0.5, -1.0])
    assert torch.equal(namespace["f"](x), torch.exp(x) * 2)
    scoped = "import tensorflow.compat.v1 as tf\nwith tf.variable_scope('V'):\n    w = tf.get_variable('w', [2])\n"
    assert [e.tf for e in port_source(scoped, "v.py").flagged][1:] == ["tf.get_variable"]


def test_keras_backend_functions_and_tf1_parameter_spellings_translate() -> None:
    source = textwrap.dedent(
        """\
        import tensorflow.compat.v1 as tf
        from tensorflow.keras import backend as K


        def f(x):
            n = tf.reduce_sum(K.square(x), reduction_indices=1, keep_dims=True)
            y = K.clip(K.sign(x), 0.0, None) * K.mean(n, axis=0) + K.clip(x, 1.0, 0.5)
            shape = tf.shape(y)
            y = tf.reshape(tf.reshape(y, [-1]), shape)
            return K.cast(y, K.floatx()), tf.to_double(y), tf.div(tf.to_int32(y), 2)
        """
    )
    result = port_source(source, "k.py")
    assert not result.flagged, result.text("k.py")
    namespace: dict[str, Any] = {}
    exec(result.code, namespace)
    x = torch.tensor([[1.0, -2.0], [0.5, 0.0]])
    n = torch.sum(x * x, dim=1, keepdim=True)
    clipped = torch.full_like(x, 1.0)  # Keras: a max_value below min_value becomes min_value
    expected = torch.clamp(torch.sign(x), min=0.0) * torch.mean(n, dim=0) + clipped
    y, double, halved = namespace["f"](x)
    assert torch.equal(y, expected) and torch.equal(double, expected.double())
    assert torch.equal(halved, torch.tensor([[1, 0], [1, 0]], dtype=torch.int32))  # 3 // 2, 1 // 2


def test_imports_it_cannot_place_are_flagged_and_tf_function_removed() -> None:
    source = textwrap.dedent(
        """\
        import tensorflow as tf
        from tensorflow import io


        @tf.function(jit_compile=True, input_signature=[tf.TensorSpec(None, tf.float32)])
        def f(x):
            import tensorflow as tf2
            return tf.exp(x)


        @tf.function  # removed
        def g(x):
            return tf.function(tf.exp)(x)
        """
    )
    result = port_source(source)
    assert {(e.line, e.tf) for e in result.flagged} == {(7, "import tensorflow as tf2")}
    assert (2, "(removed: its names are not used)") in {(e.line, e.torch) for e in result.entries}
    # with arguments too: jit_compile= and input_signature= change no number
    assert (5, "@tf.function", "(removed)") in {(e.line, e.tf, e.torch) for e in result.entries}
    assert "return torch.exp(x)" in result.code
    assert "@tf.function" not in result.code.split("def f")[1]
    assert "# removed\ndef g(x):\n    return torch.exp(x)" in result.code


def test_from_imports_and_compat_v2_bind_their_names() -> None:
    source = textwrap.dedent(
        """\
        from tensorflow import custom_gradient, nn
        from tensorflow.math import reduce_sum as total
        from tensorflow.compat import v2 as tf2


        @custom_gradient
        def f(x):
            return total(nn.relu(x), axis=0), lambda dy: dy * tf2.ones_like(x)
        """
    )
    result = port_source(source)
    assert not result.flagged, result.text()
    assert "tensorflow" not in result.code
    assert "@custom_gradient" in result.code and "torch.sum(torch.relu(x), dim=0)" in result.code
    assert "torch.ones_like(x)" in result.code


def test_compat_v1_translates_what_v2_shares_and_flags_the_graph_api() -> None:
    source = (
        "import tensorflow.compat.v1 as tf\nfrom tensorflow import nn\nfrom tensorflow import io\n"
        "import tensorflow.math as tfm\n"
        "y = tf.transpose(tf.log(nn.relu(x)), [1, 0], 'name')\nz = tfm.tanh(x)\n"
        "w = tf.where(x > 0, x, y)\nsess = tf.Session()\nf = io.read_file('a')\n"
    )
    result = port_source(source)
    assert [(e.line, e.tf) for e in result.flagged] == [
        (1, "import tensorflow.compat.v1 as tf"),  # kept for tf.Session
        (3, "from tensorflow import ..."),
        (8, "tf.Session"),
        (9, "io.read_file"),
    ]
    assert "y = torch.permute(torch.log(torch.relu(x)), [1, 0])" in result.code
    assert "w = tf_ops.where_v1(x > 0, x, y)" in result.code  # TF1's where does not broadcast
    assert "TF1 graph-mode API" in result.flagged[2].why
    assert "`io` comes from `tensorflow`" in result.flagged[3].why
    # only the imports that untranslated uses read are kept
    assert "import tensorflow.math" not in result.code and "import nn" not in result.code
    assert "z = torch.tanh(x)" in result.code


def test_the_tensorflow_module_used_as_a_value_keeps_the_import() -> None:
    result = port_source("import tensorflow as tf\n\nops = [tf, tf.exp]\n")
    assert ("tf", "the tensorflow module used as a value") in {
        (e.tf, e.why.split(":")[0]) for e in result.flagged
    }
    assert "import tensorflow as tf" in result.code and "torch.exp" in result.code


def test_an_argument_used_twice_is_evaluated_once() -> None:
    result = port_source(
        "import tensorflow as tf\n\n_t1 = 1\ny = tf.nn.softplus(f(x) - 1.0)\n", "m.py"
    )
    assert "torch.logaddexp((_t2 := f(x) - 1.0), torch.zeros_like(_t2))" in result.code
    calls = []
    namespace = {"f": lambda v: calls.append(v) or v, "x": torch.tensor([0.5, 30.0])}
    exec(compile(result.code, "m.py", "exec"), namespace)
    assert len(calls) == 1


def test_range_of_a_name_needs_the_name_bound_once_to_an_int() -> None:
    source = textwrap.dedent(
        """\
        import tensorflow as tf


        def f(x):
            n = tf.shape(x)[0]
            m = 3
            for _ in range(2):
                b = tf.range(m)  # m is a float the second time round
                m = m * 0.5
            return tf.range(n), b
        """
    )
    result = port_source(source)
    assert [(e.line, e.tf) for e in result.flagged if e.function == "f"] == [(8, "tf.range")]
    assert "return torch.arange(n, dtype=torch.int32), b" in result.code


TAPES = """\
import tensorflow as tf

scale = 2.0


def tape_reads_a_value_from_before(x):
    z = x * 2.0
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = z * x
    return tape.gradient(y, x)


def tape_watching_accessed_variables(x):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x)
        y = x * x
    return tape.gradient(y, x)


def tape_jacobian(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    return tape.jacobian(y, x)


def tape_with_a_list_of_targets(x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    return tape.gradient([y, y], x)


def tape_ok(x, w):
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, w])
        y = tf.reduce_sum(x * w * scale)
    return tape.gradient(y, (x, w)), tape.gradient(y, w, output_gradients=y)


def tape_with_an_unwatched_source(x, w):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * w
    return tape.gradient(y, [x, w])


v = tf.Variable(3.0, dtype=tf.float64)
with tf.GradientTape() as module_tape:
    output = tf.exp(v * 2.0)
dv = module_tape.gradient(output, v)  # variables are watched when read
"""


def test_tapes_outside_the_pattern_are_flagged_with_why() -> None:
    result = port_source(TAPES, "tapes.py")
    why = {(e.function, e.tf): e.why for e in result.flagged}
    assert "reads `z`" in why["tape_reads_a_value_from_before", "tf.GradientTape"]
    assert "untranslated tape of line 8" in why["tape_reads_a_value_from_before", "tape.gradient"]
    assert "watch_accessed_variables" in why["tape_watching_accessed_variables", "tf.GradientTape"]
    assert "other than by" in why["tape_jacobian", "tf.GradientTape"]
    assert "list of targets" in why["tape_with_a_list_of_targets", "tf.GradientTape"]
    assert "source `w` is not watched" in why["tape_with_an_unwatched_source", "tf.GradientTape"]
    module_flags = [e for e in result.flagged if e.function == "<module>"]
    assert [e.tf for e in module_flags] == ["import tensorflow as tf"]  # kept for the others
    assert not [e for e in result.flagged if e.function == "tape_ok"]
    code = result.code
    assert "tuple(torch.autograd.grad(y, [x_watched, w_watched]" in code
    assert "grad_outputs=y, create_graph=True, allow_unused=True)[0]" in code


# Each tape outside the translated pattern, as the body of `def f(x)`, and a piece of why.
_TAPE_REFUSALS = [
    ("with tf.GradientTape() as tape, tf.GradientTape() as t2:\n    y = x * x", "alone in its"),
    ("with tf.GradientTape():\n    y = x * x", "without `as NAME`"),
    ("with tf.GradientTape() as tape:\n    y = x * x\n    tape.watch(x)", "after other"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = (lambda: x)()", "a def, class"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    x = x * 2", "a watched name"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = tape", "tape used inside"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = x * x\ng = tape.gradient(*[y, x])", "starred"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = x * x\ng = tape.gradient(y, x, unconnected_gradients=0)", "unconnected_gradients=)"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = x * x\ng = tape.gradient(y)", "a target and sources"),
    ("with tf.GradientTape() as tape:\n    tape.watch(x)\n    y = x * x\ng = tape.gradient(y, x[0])", "must be names"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "why"), _TAPE_REFUSALS, ids=[w for _, w in _TAPE_REFUSALS])
def test_each_tape_outside_the_pattern_is_flagged_with_its_reason(body: str, why: str) -> None:
    source = "import tensorflow as tf\n\n\ndef f(x):\n" + textwrap.indent(body, "    ") + "\n"
    flagged = [e.why for e in port_source(source).flagged if e.tf == "tf.GradientTape"]
    assert why in flagged[0]  # the first tape of the block


def test_a_translated_tape_gives_tf_gradients_differentiably() -> None:
    result = port_source(TAPES, "tapes.py")
    namespace: dict[str, Any] = {"tf": None}  # only the flagged functions, not called, use it
    code = result.code.replace("import tensorflow as tf\n", "")
    exec(compile(code, "tapes.py", "exec"), namespace)
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([0.5, 3.0], dtype=torch.float64)
    (dx, dw), dw_scaled = namespace["tape_ok"](x, w)
    torch.testing.assert_close(dx, 2.0 * w)
    torch.testing.assert_close(dw, 2.0 * x.detach())
    assert dw.requires_grad  # it depends on x, which requires grad
    y = (x * w * 2.0).sum().detach()
    torch.testing.assert_close(dw_scaled, 2.0 * x.detach() * y)
    (second,) = torch.autograd.grad(dw.sum(), x)
    torch.testing.assert_close(second, torch.full_like(x, 2.0))
    torch.testing.assert_close(namespace["dv"], 2.0 * torch.exp(torch.tensor(6.0)).double())
    assert not x.grad_fn and w.grad is None and not w.requires_grad  # inputs left as they were


def test_a_combined_tensorflow_import_binds_nothing() -> None:
    result = port_source("import numpy as np, tensorflow as tf\n\ny = tf.exp(np.ones(2))\n")
    assert [(e.line, e.tf) for e in result.entries] == [
        (1, "import numpy as np, tensorflow as tf"),
        (3, "tf.exp"),  # a use of a name its import does not bind: flagged at its line
    ]
    assert "whose import is not translated" in result.entries[1].why
    assert result.flagged and "tf.exp" in result.code and "import torch" not in result.code


def test_translated_report_lists_each_op_by_function() -> None:
    result, _ = ported("logsumexp.py")
    by_line = {(e.line, e.tf, e.function) for e in result.translated}
    assert (8, "tf.reduce_max", "logsumexp") in by_line
    assert (13, "tf.exp", "logsumexp.grad") in by_line
    assert any(e.tf == "import tensorflow as tf" for e in result.translated)
    text = result.text("logsumexp.py")
    assert text.startswith("logsumexp.py: ") and "0 flagged" in text
    assert "line 8: tf.reduce_max -> torch.amax(" in text


def test_comments_and_formatting_survive() -> None:
    source = textwrap.dedent(
        """\
        # A header comment.
        import tensorflow as tf  # the framework


        @tf.custom_gradient  # decorated
        def f(x):  # signature comment
            # before the body
            y = tf.reduce_sum(x,  # inside a call
                              axis=0)
            z = (x *   2)  # odd spacing is kept

            def grad(dy):
                return dy  # identity
            return y + tf.reduce_sum(z), grad
        """
    )
    result = port_source(source)
    assert not result.flagged
    for comment in (
        "# A header comment.",
        "# the framework",
        "# decorated",
        "# signature comment",
        "# before the body",
        "# inside a call",
        "# odd spacing is kept",
        "# identity",
    ):
        assert comment in result.code
    assert "z = (x *   2)" in result.code
    assert "import torch  # the framework" in result.code
    assert "@custom_gradient  # decorated" in result.code


def test_guide_table_is_the_rendering_of_the_table() -> None:
    guide = (ROOT / "docs" / "migrating_from_tensorflow.md").read_text(encoding="utf-8")
    assert with_guide_table(guide) == guide, "regenerate it: python3 .ci/port_table.py"
    for rule in RULES:
        assert f"`tf.{rule.names[0]}`" in guide


def test_syntax_error_names_the_file_and_line() -> None:
    with pytest.raises(ValueError, match=r"bad\.py:2:.*cannot parse"):
        port_source("import tensorflow as tf\ndef (:\n", "bad.py")


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )


@pytest.mark.slow
def test_import_does_not_import_libcst() -> None:
    done = _python(
        "import sys, tf_compat_grad, tf_compat_grad.port, tf_compat_grad._cli\n"
        "assert 'libcst' not in sys.modules, 'libcst imported'\n"
        f"assert tf_compat_grad.__file__.startswith({str(ROOT)!r}), tf_compat_grad.__file__\n"
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_missing_libcst_says_how_to_install_it() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['libcst'] = None  # as if not installed\n"
        "from tf_compat_grad.port import PortDependencyError, port_source\n"
        "try:\n"
        "    port_source('import tensorflow as tf\\n')\n"
        "except PortDependencyError as error:\n"
        "    print(error)\n"
    )
    assert done.returncode == 0, done.stderr
    assert 'pip install "tf-compat-grad[port]"' in done.stdout


# --- the command line ------------------------------------------------------------------------


def test_cli_writes_the_port_and_the_report(tmp_path: Path) -> None:
    output, report = tmp_path / "ported.py", tmp_path / "report.txt"
    status = _cli.main(
        ["port", str(CORPUS / "log1pexp.py"), "-o", str(output), "--report", str(report)]
    )
    assert status == 0
    assert output.read_text(encoding="utf-8") == ported("log1pexp.py")[0].code
    assert "0 flagged" in report.read_text(encoding="utf-8")


def test_cli_json_report_and_exit_status_1_when_flagged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "step.py"
    source.write_text(UNTRANSLATABLE, encoding="utf-8")
    output = tmp_path / "out.py"
    status = _cli.main(["port", str(source), "-o", str(output), "--json"])
    assert status == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1 and document["flagged"] == 10
    assert [f["input"] for f in document["files"]] == [str(source)]
    assert MARK in output.read_text(encoding="utf-8")


def test_cli_prints_the_port_to_stdout_and_the_report_to_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _cli.main(["port", str(CORPUS / "gradient_reversal.py")]) == 0
    out, err = capsys.readouterr()
    assert out == ported("gradient_reversal.py")[0].code
    assert "gradient_reversal.py: " in err and "translated" in err


def test_cli_missing_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["port", str(tmp_path / "absent.py")]) == 2
    assert "absent.py" in capsys.readouterr().err


KERAS = """\
import keras
import tensorflow as tf
from tensorflow.keras.layers import Layer, LSTM


@keras.saving.register_keras_serializable()
class Base(Layer):
    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones")


class Derived(Base):
    def call(self, x):
        self.w.assign_add(tf.ones_like(self.w))
        other.assign(x)
        return x * self.w


class Net(keras.Model):
    def call(self, x):
        return LSTM(2)(x) + keras.layers.GRU(2)(x)
"""


def test_keras_classes_imports_and_decorators() -> None:
    result = port_source(KERAS, "net.py")
    code = result.code
    assert "register_keras_serializable" not in code
    assert "class Base(layers.Layer):" in code and "class Net(layers.Layer):" in code
    assert (
        "    def forward(self, x):\n        self.w.detach().add_(torch.ones_like(self.w))" in code
    )
    assert "other.assign(x)" in code  # not a weight of the class: left as it is
    # LSTM is not translated: its import stays, the names it translates come from the port
    assert [(e.line, e.tf) for e in result.flagged] == [
        (1, "import keras"),
        (3, "from tensorflow.keras.layers import Layer, LSTM"),
        (21, "LSTM"),
        (21, "keras.layers.GRU"),
    ]
    assert "a Keras layer that tf_compat_grad.layers does not have" in result.flagged[3].why
    assert "from tensorflow.keras.layers import Layer, LSTM" in code
    assert "`LSTM` comes from `tensorflow.keras.layers`" in result.flagged[2].why
    assert "import keras\n" in code and "import tensorflow as tf\n" not in code
    assert code.startswith("# tf_compat_grad port: finish by hand: 2 construct(s)")


def test_a_built_layer_is_an_nn_module_with_keras_weights() -> None:
    result, module = ported("keras_quantizer.py")
    layer = module.LearnedStepQuantizer(dtype=torch.float64)
    assert isinstance(layer, nn.Module) and not layer.built
    layer(torch.ones(2, 3, dtype=torch.float64))
    assert [n for n, _ in layer.named_parameters()] == ["step"]
    assert [n for n, _ in layer.named_buffers()] == ["calls"]
    assert layer.get_config()["levels"] == 2
    assert ("def call", "def forward") in {(e.tf, e.torch) for e in result.translated}


def test_a_dtype_given_by_its_name_becomes_torchs_or_is_flagged() -> None:
    source = (
        "import tensorflow as tf\n"
        'v = tf.Variable(1.0, trainable=False, dtype="float32")\n'
        "y = tf.cast(v, 'float64')\n"
        'z = tf.zeros([2], dtype="string")\n'
    )
    result = port_source(source, "a.py")
    assert (
        "nn.Parameter(torch.tensor(1.0, dtype=torch.float32), requires_grad=False)" in result.code
    )
    assert "torch.as_tensor(v).to(torch.float64)" in result.code
    assert "the dtype 'string' has no torch dtype of that name" in result.code


def test_a_function_used_as_a_value_becomes_its_translation() -> None:
    """`act = tf.nn.softplus`: a lambda of its leading parameters with the call's translation;
    a name whose every variant needs a fact about its arguments stays flagged."""
    source = (
        "import tensorflow as tf\n\nact = tf.nn.softplus\ntotal = tf.reduce_sum\n"
        "count = tf.range\n\n\ndef f(x):\n    return act(x) + total(x)\n"
    )
    result = port_source(source)
    assert "act = (lambda features: torch.logaddexp(features, torch.zeros_like(features)))" in (
        result.code
    )
    assert [e.tf for e in result.flagged][-1:] == ["tf.range"]  # variants need int arguments
    namespace: dict[str, Any] = {}
    exec(result.code.replace("import tensorflow as tf", "").replace("tf.range", "0"), namespace)
    x = torch.tensor([-30.0, 0.5, 40.0], dtype=torch.float64)
    want = torch.logaddexp(x, torch.zeros_like(x)) + x.sum()
    torch.testing.assert_close(namespace["f"](x), want)


def test_a_tensorflow_import_whose_names_are_unused_is_removed() -> None:
    source = (
        "import tensorflow as tf\nfrom tensorflow.keras.optimizers import Adam\n"
        "from tensorflow.keras import losses\nimport tensorflow.keras.backend as K\n"
        "from tensorflow.keras.constraints import MinMaxNorm\n__all__ = ['MinMaxNorm']\n\n\n"
        "def f(x):\n    return tf.exp(x) + losses.mse(x, x)\n"
    )
    result = port_source(source)
    removed = {e.tf for e in result.entries if e.torch == "(removed: its names are not used)"}
    assert removed == {"from tensorflow.keras.optimizers import ..."}
    assert "Adam" not in result.code and "import tensorflow.keras.backend as K" not in result.code
    # a name read (or named in a string) keeps its import, flagged
    assert [e.tf for e in result.flagged] == [
        "from tensorflow.keras import ...",
        "from tensorflow.keras.constraints import ...",
        "losses.mse",
    ]


INTERNAL_MODULES = """\
from tensorflow.python.framework import dtypes, ops
from tensorflow.python.ops import array_ops, gen_math_ops, math_ops, nn_ops
from tensorflow.python.ops.custom_gradient import custom_gradient


@custom_gradient
def f(x):
    x = ops.convert_to_tensor(x, name="x")
    y = math_ops.reduce_sum(math_ops.cast(x, dtypes.float64)) * array_ops.ones_like(x)

    def grad(dy):
        with ops.control_dependencies([dy]):
            return 3 * dy

    return y, grad


def g(x):
    return gen_math_ops.sigmoid(x) + nn_ops.relu(ops.convert_to_tensor(x, None, "x", True))
"""


def test_internal_modules_translate_the_names_that_are_public_functions() -> None:
    """`math_ops.cast` is `tf.cast` (the same function object in TF 2.21); a name of an internal
    module that is no public function, or an argument the public one lacks, stays flagged."""
    result = port_source(INTERNAL_MODULES)
    assert "y = torch.sum(torch.as_tensor(x).to(torch.float64)) * torch.ones_like(x)" in result.code
    assert "x = tf_ops.convert_to_tensor(x)" in result.code
    assert "with tf_ops.control_dependencies([dy]):" in result.code
    assert {(e.tf, e.why) for e in result.flagged if e.function == "g"} == {
        ("nn_ops.relu", "not in the translation table"),
        ("gen_math_ops.sigmoid", "not in the translation table"),
        ("ops.convert_to_tensor", "argument `as_ref` is not translated"),
    }
    code = result.code.replace("from tensorflow", "# from tensorflow")
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    x = torch.tensor([0.5, -2.0], dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(namespace["f"](x).sum(), x)
    assert grad.tolist() == [3.0, 3.0]


def test_control_dependencies_calls_its_callables() -> None:
    called = []
    with tf_ops.control_dependencies([torch.ones(1), lambda: called.append(1)]):
        called.append(2)
    assert called == [1, 2]


# tf.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s * x + tf.sin(s)), (0, x),
# maximum_iterations=3) at x = [0.3, -1.2] (float64) in TF 2.21: s, ds/dx . 1, d(ds/dx . 1)/dx . 1
WHILE_LOOP_TF = (
    [0.6196319531377289, 0.02494238650192912],
    [3.2013070690522136, -0.3665923782523461],
    [7.1744107663166, 3.9781812424702943],
)
WHILE_LOOP = """\
import tensorflow as tf


def f(x):
    return tf.while_loop(
        lambda i, s: i < 4, lambda i, s: (i + 1, s * x + tf.sin(s)), (0, x), maximum_iterations=3
    )
"""


def test_while_loop_runs_as_tensorflow_runs_it_eagerly() -> None:
    result = port_source(WHILE_LOOP)
    assert "return tf_ops.while_loop(" in result.code and not result.flagged
    namespace: dict[str, Any] = {}
    exec(result.code, namespace)
    x = torch.tensor([0.3, -1.2], dtype=torch.float64, requires_grad=True)
    i, s = namespace["f"](x)
    assert (i.dtype, i.item()) == (torch.int32, 3)  # the Python int became TF's int32 tensor
    (g,) = torch.autograd.grad(s.sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)
    for actual, expected in zip((s, g, h), WHILE_LOOP_TF, strict=True):
        torch.testing.assert_close(actual.detach(), torch.tensor(expected, dtype=torch.float64))
    # one loop variable stays a 1-tuple (TF2's while_loop returns the structure it was given)
    (a,) = tf_ops.while_loop(lambda a: a < 10.0, lambda a: (a * 3.0,), (1.0,))
    assert (a.dtype, a.item()) == (torch.float32, 27.0)
    with pytest.raises(ValueError, match="another structure"):
        tf_ops.while_loop(lambda a: a < 10.0, lambda a: (a, a), (1.0,))


AUGMENTED = """\
import tensorflow as tf


def f(x, acc):
    d = tf.sqrt(x)
    d += 1e-6
    d *= 2.0 - x
    acc += x
    items = [x]
    items += [d]
    n = 0
    for i in range(2):
        n += 1
    return d, acc, items, n
"""


def test_augmented_assignment_on_a_tensor_makes_a_new_tensor() -> None:
    """TF's `d += eps` binds a new tensor; torch's would write into sqrt's output, which its
    backward needs. A parameter, a list or a loop-bound name keeps its augmented assignment."""
    result = port_source(AUGMENTED)
    assert "    d = d + 1e-6\n    d = d * (2.0 - x)\n" in result.code
    assert "    acc += x\n" in result.code and "    items += [d]\n" in result.code
    assert "        n += 1\n" in result.code
    namespace: dict[str, Any] = {}
    exec(result.code, namespace)
    x = torch.tensor([0.25, 4.0], dtype=torch.float64, requires_grad=True)
    d = namespace["f"](x, torch.zeros(2, dtype=torch.float64))[0]
    (g,) = torch.autograd.grad(d.sum(), x, create_graph=True)
    (h,) = torch.autograd.grad(g.sum(), x)  # sqrt's output was not modified in place
    want_d = (torch.sqrt(x) + 1e-6) * (2.0 - x)
    (want_g,) = torch.autograd.grad(want_d.sum(), x, create_graph=True)
    (want_h,) = torch.autograd.grad(want_g.sum(), x)
    torch.testing.assert_close((d, g, h), (want_d, want_g, want_h))


def test_a_docstring_copied_from_tensorflow_is_removed() -> None:
    source = (
        "import tensorflow as tf\n\n\nclass Floor(tf.keras.layers.Layer):\n"
        "    def call(self, x):\n        return tf.floor(x)\n\n"
        "    call.__doc__ = tf.keras.layers.Layer.call.__doc__\n"
    )
    result = port_source(source)
    assert "__doc__" not in result.code and not result.flagged
    assert (8, "(removed: TensorFlow's docstring)") in {(e.line, e.torch) for e in result.entries}


# tf.math.bincount in TF 2.21: (arguments) -> counts
BINCOUNT_TF = [
    (
        ([[2, 0], [2, 5]],),
        {"minlength": 4, "maxlength": 5, "dtype": torch.float64},
        [1, 0, 2, 0, 0],
    ),
    (([0.5, 3.9, 3.0],), {}, [1, 0, 0, 2]),  # a float arr is cast to int32
    ((torch.zeros(0, dtype=torch.int32),), {"minlength": 2}, [0, 0]),
]


@pytest.mark.parametrize(("args", "kwargs", "expected"), BINCOUNT_TF)
def test_bincount_counts_as_tensorflow(args: Any, kwargs: Any, expected: list[int]) -> None:
    counts = tf_ops.bincount(*args, **kwargs)
    assert counts.dtype == kwargs.get("dtype", torch.int32) and counts.tolist() == expected


def test_bincount_translates_without_weights_and_refuses_negative_values() -> None:
    source = (
        "import tensorflow as tf\n\n\ndef f(i, w):\n"
        "    return tf.math.bincount(i, minlength=3), tf.math.bincount(i, weights=w)\n"
    )
    result = port_source(source)
    assert "tf_ops.bincount(i, minlength=3)" in result.code
    assert [e.tf for e in result.flagged][-1:] == ["tf.math.bincount"]  # weights=
    with pytest.raises(ValueError, match="non-negative"):
        tf_ops.bincount(torch.tensor([-1, 2]))
