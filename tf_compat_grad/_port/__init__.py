"""The TensorFlow-to-PyTorch source translator behind `python -m tf_compat_grad port`.

`_table` holds the translation table as data, `_transform` the LibCST transformer that applies
it (the only module that needs libcst), and `_report` what a port returns. The public entry
point is `tf_compat_grad.port.port_source`.
"""
