"""Collection settings for the whole repository: the tests and the package's doctests."""

import importlib.util

# The port corpus is TensorFlow source, the input of tests/test_port.py (and of its recorder,
# record_tf.py), not modules to import under doctest collection.
collect_ignore = ["tests/port_corpus"]

# The translator's transformer imports libcst, an optional dependency (the `port` extra, also in
# `test`): without libcst its modules cannot be imported, so doctest collection leaves them out.
if importlib.util.find_spec("libcst") is None:
    collect_ignore += [
        f"tf_compat_grad/_port/{name}.py"
        for name in (
            "_transform",
            "_state",
            "_imports",
            "_arguments",
            "_template",
            "_syntax",
            "_tape",
        )
    ]
