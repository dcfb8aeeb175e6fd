"""`port` writes `@custom_gradient(captured="constant")` where the decorated function's own code
reads a name bound in an enclosing function (TensorFlow's behaviour for such a tensor: no
gradient through the function's outputs), and says so in the report; nowhere else."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("libcst")

from tf_compat_grad.port import port_source

OPTION = '@custom_gradient(captured="constant")'


def _ported(source: str) -> tuple[str, list[str]]:
    result = port_source(textwrap.dedent(source), "m.py")
    return result.code, [e.tf for e in result.entries if "captures" in e.tf]


def test_closures_of_the_enclosing_functions_get_the_option_in_order_of_reading():
    code, notes = _ported(
        """
        import tensorflow as tf

        def outer(a, b):
            scale = b * 2
            def middle(c):
                @tf.custom_gradient
                def f(x):
                    y = [x * s for s in (scale, c)]
                    return x * a + y[0], lambda dy: dy
                return f
            return middle
        """
    )
    assert OPTION in code
    assert notes == [
        "@tf.custom_gradient on a function that captures `scale`, `c`, `a` from the enclosing "
        "function"
    ]


def test_module_level_names_functions_and_grad_fns_own_reads_get_no_option():
    code, notes = _ported(
        """
        import math
        import tensorflow as tf

        W = tf.constant(2.0)

        @tf.custom_gradient
        def top(x):
            return x * W * math.pi, lambda dy: dy

        def outer(a):
            def helper(v):
                return v * 2
            @tf.custom_gradient
            def f(x):
                def grad(dy):
                    return dy * a  # only grad_fn reads `a`
                return helper(x), grad
            return f
        """
    )
    assert OPTION not in code and notes == []
    assert code.count("@custom_gradient\n") == 2
