"""Collection settings for the whole repository: the tests and the package's doctests."""

import importlib.util

# The port corpus is TensorFlow source, the input of tests/test_port.py (and of its recorder,
# record_tf.py), not modules to import under doctest collection.
collect_ignore = ["tests/port_corpus"]

# The translator's transformer imports libcst, an optional dependency (the `port` extra, also in
# `test`): without libcst its module cannot be imported, so doctest collection leaves it out.
if importlib.util.find_spec("libcst") is None:
    collect_ignore.append("tf_compat_grad/_port/_transform.py")
