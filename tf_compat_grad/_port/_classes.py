"""The classes the port makes `nn.Module`s: a subclass of a Keras layer (or `tf.keras.Model`)
or of `tf.Module` gets its base from `tf_compat_grad.layers` (through the table's value rules,
`_table_keras`), `call` (a `tf.Module`'s `__call__`) becomes `forward`, and `assign`,
`assign_add`, `assign_sub` on the class's weights become in-place updates outside autograd.
A class of the module derived from such a class is one too. A docstring copied from TensorFlow
(`call.__doc__ = tf.keras.layers.Layer.call.__doc__`) is removed: it documents TF's API."""

from __future__ import annotations

import libcst as cst

from ._imports import _Imports
from ._syntax import _code, _dotted
from ._table import TABLE


class _Classes(_Imports):
    """The part of the transformer that translates Keras and `tf.Module` subclasses."""

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.skip.add(id(node.name))
        self.owners.append("")

    def docstring_copy(self, node: cst.Assign) -> bool:
        """`NAME.__doc__ = tf.SOMETHING.__doc__` (marked to be removed)."""
        value, targets = node.value, node.targets
        if not (
            len(targets) == 1
            and isinstance(targets[0].target, cst.Attribute)
            and targets[0].target.attr.value == "__doc__"
            and isinstance(value, cst.Attribute)
            and value.attr.value == "__doc__"
        ):
            return False
        root = value.value
        while isinstance(root, cst.Attribute):
            root = root.value
        if not (isinstance(root, cst.Name) and root.value in {*self.aliases, *self.direct}):
            return False
        self.removed.add(id(node))
        return True

    def leave_Assign(
        self, original_node: cst.Assign, updated_node: cst.Assign
    ) -> cst.Assign | cst.RemovalSentinel:
        if id(original_node) not in self.removed:
            return super().leave_Assign(original_node, updated_node)
        self.translated(original_node, _code(original_node), "(removed: TensorFlow's docstring)")
        return cst.RemoveFromParent()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.skip.add(id(node.name))
        kinds = [self.base_kind(base.value) for base in node.bases if base.keyword is None]
        kind = next((k for k in kinds if k), "")
        if kind:
            self.layer_classes[node.name.value] = kind
        self.owners.append(kind)
        weights = self.variable_attributes(node) if kind else set()
        for base in node.bases:  # and those of its bases in this module
            if isinstance(base.value, cst.Name):
                weights |= self.class_weights.get(base.value.value, set())
        self.class_weights[node.name.value] = weights
        self.class_variables.append(weights)

    def variable_attributes(self, node: cst.ClassDef) -> set[str]:
        """The attributes a layer's methods bind to a weight: `self.NAME = self.add_weight(...)`
        or `self.NAME = tf.Variable(...)`."""
        found: set[str] = set()
        porter = self

        class Finder(cst.CSTVisitor):
            def visit_Assign(self, assign: cst.Assign) -> None:
                value = assign.value
                if not isinstance(value, cst.Call):
                    return
                weight = _dotted(value.func) == "self.add_weight"
                if weight or porter.tf_name(value.func) == "Variable":
                    for target in assign.targets:
                        name = _dotted(target.target)
                        if name.startswith("self.") and name.count(".") == 1:
                            found.add(name.removeprefix("self."))

        node.body.visit(Finder())
        return found

    def base_kind(self, base: cst.BaseExpression) -> str:
        """ "layers.Layer" or "layers.Module" for a base class the port makes a
        `tf_compat_grad.layers` class (a Keras layer, `tf.Module`, or a class of this module
        derived from one), else ""."""
        if isinstance(base, cst.Name) and base.value in self.layer_classes:
            return self.layer_classes[base.value]
        name = self.tf_name(base)
        rule = TABLE.get(name) if name is not None else None
        if rule is not None and rule.value in ("layers.Layer", "layers.Module"):
            return rule.value
        if rule is not None and rule.value.startswith("layers."):
            return "layers.Layer"  # a built-in Keras layer, subclassed
        return ""

    def leave_ClassDef(
        self, original_node: cst.ClassDef, updated_node: cst.ClassDef
    ) -> cst.ClassDef:
        self.owners.pop()
        self.class_variables.pop()
        return updated_node

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        """`call` of a Keras layer, `__call__` of a `tf.Module`, becomes `forward`."""
        self.owners.pop()
        owner = self.owners[-1] if self.owners else ""
        method = {"layers.Layer": "call", "layers.Module": "__call__"}.get(owner)
        if method is None or original_node.name.value != method:
            return updated_node
        self.translated(original_node, f"def {method}", "def forward")
        return updated_node.with_changes(name=cst.Name("forward"))

    def assignment(self, original: cst.Call, call: cst.Call) -> cst.BaseExpression | None:
        """`self.w.assign(v)` -> `self.w.detach().copy_(v)` (and `assign_add`, `assign_sub`;
        `.value()` -> `self.w`) on a layer's weight or a module-level variable: not differentiated, as in TF; torch's version counter still
        refuses a backward that needs the old value, where `.data` would give wrong numbers."""
        func = call.func
        method = {"assign": "copy_", "assign_add": "add_", "assign_sub": "sub_"}
        if not isinstance(func, cst.Attribute):
            return None
        target = _dotted(func.value)
        own = self.class_variables[-1] if self.class_variables else set()
        known = (target.removeprefix("self.") in own and target.count(".") == 1) or (
            target in self.all_variables
        )
        if not known:
            return None
        if func.attr.value in ("value", "read_value") and not call.args:  # the tensor itself
            self.translated(original, f".{func.attr.value}()", target)
            return func.value
        if func.attr.value not in method:
            return None
        if len(call.args) != 1 or call.args[0].keyword is not None:
            return None
        detached = cst.Call(cst.Attribute(func.value, cst.Name("detach")))
        result = call.with_changes(func=cst.Attribute(detached, cst.Name(method[func.attr.value])))
        self.translated(original, f".{func.attr.value}()", _code(result))
        return result
