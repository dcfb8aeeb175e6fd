"""The gradient checker behind `tf_compat_grad.testing` and `python -m tf_compat_grad check`;
docs/architecture.md says which module holds what."""
