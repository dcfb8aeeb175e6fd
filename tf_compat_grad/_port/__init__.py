"""The TensorFlow-to-PyTorch source translator behind `python -m tf_compat_grad port`.

`_table` holds the translation table as data (`_rule` says what a rule is, `_table_*` hold its
families), `_transform` the LibCST transformer that applies it (with `_statements`, `_captures`,
`_classes`, `_imports`, `_state`, `_arguments`, `_template` and `_syntax`) and `_tape` the
`tf.GradientTape` pattern it translates (the only modules that need libcst), and `_report` what a
port returns. The public entry point is `tf_compat_grad.port.port_source`.
"""
