"""The tensorflow imports: which statements bind names the transformer translates
(`_bindings`), the names each binds and what they stand for (`tf_name`), the uses of names
bound by other tensorflow imports (flagged), and the torch imports that replace them."""

from __future__ import annotations

import libcst as cst

from ._report import KEPT, MARK, Entry
from ._state import _PorterState
from ._syntax import _alias_name, _code, _dotted, _imported_names
from ._table import IMPORTS, TABLE, V1_ALIASES

_IMPORTS_WHY = (
    "translated imports: `import tensorflow as tf`, `import tensorflow.compat.v1 as tf` (or "
    "`v2`), `import keras`, and `from tensorflow[.MODULE] import NAME` (or `keras`) of table "
    "names and their modules (`nn`, `math`, `keras.layers`), each a statement of its own at "
    "module level"
)
_V2_MODULES = ("tensorflow", "tensorflow.compat.v2")
_KERAS_PACKAGES = ("keras", "tf_keras")  # Keras 3 and Keras 2 on their own: `tensorflow.keras`


def _tensorflow_module(module: str) -> str:
    """The module's name under tensorflow: `keras.layers` is `tensorflow.keras.layers`, and
    Keras 3's implementation package `keras.src.saving` is its public `keras.saving`."""
    root, _, rest = module.partition(".")
    if root in _KERAS_PACKAGES:
        rest = "" if rest == "src" else rest.removeprefix("src.")
        return "tensorflow.keras" + ("." + rest if rest else "")
    return module


def _bindings(small: cst.BaseSmallStatement) -> dict[str, tuple[str, str]]:
    """The names an import statement binds to tensorflow, each a ("module", prefix) or a
    ("name", table name); empty if it is not one the translator takes (see `_IMPORTS_WHY`).
    A `from` import may also bind names outside the table: their uses are flagged."""
    if isinstance(small, cst.Import):
        if len(small.names) != 1:
            return {}
        alias = small.names[0]
        module = _tensorflow_module(_dotted(alias.name))
        if module == "tensorflow.keras" and alias.asname is None:
            return {_dotted(alias.name): ("module", "keras")}  # import keras
        if module == "tensorflow" or (module in _V2_MODULES and alias.asname is not None):
            return {_alias_name(alias): ("module", "")}
        prefix = module.removeprefix("tensorflow.")
        if (
            module.startswith("tensorflow.")
            and alias.asname is not None
            and any(known.startswith(prefix + ".") for known in TABLE)
        ):
            return {_alias_name(alias): ("module", prefix)}  # import tensorflow.math as tfm
        return {}
    if not isinstance(small, cst.ImportFrom) or small.relative or small.module is None:
        return {}
    module = _tensorflow_module(_dotted(small.module))
    if isinstance(small.names, cst.ImportStar):
        return {}
    if module == "tensorflow.compat":
        base = None
    elif module in _V2_MODULES:
        base = ""
    elif module.startswith("tensorflow."):
        base = module.removeprefix("tensorflow.")
    else:
        return {}
    found: dict[str, tuple[str, str]] = {}
    for alias in small.names:
        name = _dotted(alias.name)
        if base is None:  # from tensorflow.compat import v2 [as tf], v1 [as tf]
            if name not in ("v1", "v2"):
                return {}
            found[_alias_name(alias)] = ("module", "" if name == "v2" else "compat.v1")
            continue
        full = f"{base}.{name}" if base else name
        if full in TABLE:
            found[_alias_name(alias)] = ("name", full)
        elif any(known.startswith(full + ".") for known in TABLE):
            found[_alias_name(alias)] = ("module", full)
        # another name stays bound by the import, which is kept while it is used (flagged)
    return found


def _import_lines(needed: set[str], present: set[str]) -> list[str]:
    """The import statements the translations need, in a fixed order, less those present."""
    lines = [IMPORTS[n] for n in ("torch", "nn") if n in needed]
    ours = sorted(n for n in needed if IMPORTS[n].startswith("from tf_compat_grad"))
    if ours:
        lines.append(f"from tf_compat_grad import {', '.join(ours)}")
    return [line for line in lines if line not in present]


class _Imports(_PorterState):
    """The part of the transformer that reads and rewrites the tensorflow imports and resolves
    the names they bind."""

    def visit_Module(self, node: cst.Module) -> None:
        """Find the names bound to tensorflow by the import statements it translates, before
        their uses are visited (see `_bindings`); every other tensorflow import is flagged."""

        class Names(cst.CSTVisitor):
            def visit_Name(inner, name: cst.Name) -> None:
                self.names.add(name.value)

        node.visit(Names())

        class Uses(cst.CSTVisitor):  # the names read outside the import statements
            def visit_Import(inner, node: cst.Import | cst.ImportFrom) -> bool:
                return False

            visit_ImportFrom = visit_Import

            def visit_Name(inner, name: cst.Name) -> None:
                self.uses.add(name.value)

            def visit_SimpleString(inner, string: cst.SimpleString) -> None:
                self.uses.add(str(string.evaluated_value))  # `__all__ = ["Adam"]`

        node.visit(Uses())
        for statement in node.body:
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                bindings = _bindings(statement.body[0])
                if bindings:
                    self.tf_imports.append(statement)
                    for name, (kind, target) in bindings.items():
                        (self.aliases if kind == "module" else self.direct)[name] = target

        class Foreign(cst.CSTVisitor):  # names bound by the tensorflow imports it flags
            def visit_Import(inner, node: cst.Import) -> None:
                for alias in node.names:
                    if _tensorflow_module(_dotted(alias.name)).split(".")[0] == "tensorflow":
                        name = _alias_name(alias).split(".")[0]
                        self.foreign.setdefault(name, _dotted(alias.name))

            def visit_ImportFrom(inner, node: cst.ImportFrom) -> None:
                module = _dotted(node.module)
                if node.relative or _tensorflow_module(module).split(".")[0] != "tensorflow":
                    return
                if isinstance(node.names, cst.ImportStar):
                    return
                for alias in node.names:
                    self.foreign.setdefault(_alias_name(alias), module)

        node.visit(Foreign())
        self.module = node
        for statement in node.body:  # NAME = tf.Variable(...): trainable, watched when read
            if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1:
                small = statement.body[0]
                if (
                    isinstance(small, cst.Assign)
                    and len(small.targets) == 1
                    and isinstance(small.targets[0].target, cst.Name)
                    and isinstance(small.value, cst.Call)
                    and self.tf_name(small.value.func) == "Variable"
                ):
                    self.all_variables.add(small.targets[0].target.value)
                    if not any(
                        a.keyword is not None and a.keyword.value == "trainable"
                        for a in small.value.args
                    ):
                        self.variables.add(small.targets[0].target.value)
        for name in [*self.aliases, *self.direct]:
            self.foreign.pop(name, None)
        translated = {id(s.body[0]) for s in self.tf_imports}

        class Partial(cst.CSTVisitor):  # other names of a translated `from` import
            def visit_ImportFrom(inner, node: cst.ImportFrom) -> None:
                if id(node) in translated and not isinstance(node.names, cst.ImportStar):
                    for alias in node.names:
                        if _alias_name(alias) in self.foreign:
                            self.partial.add(_alias_name(alias))

        node.visit(Partial())

    def visit_Import(self, node: cst.Import | cst.ImportFrom) -> bool:
        return False  # its names are not uses

    visit_ImportFrom = visit_Import

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if any(original_node is s for s in self.tf_imports):
            return updated_node  # replaced in leave_Module
        if self.unused_import(original_node):
            self.unused.add(id(original_node))  # removed in leave_Module
            self.unused.add(id(updated_node))
            return updated_node
        for small in original_node.body:
            if isinstance(small, cst.Import) and any(
                _tensorflow_module(_dotted(a.name)).split(".")[0] == "tensorflow"
                for a in small.names
            ):
                self.flag(original_node, _code(small), _IMPORTS_WHY)
            elif (
                isinstance(small, cst.ImportFrom)
                and not small.relative
                and _tensorflow_module(_dotted(small.module)).split(".")[0] == "tensorflow"
            ):
                self.flag(original_node, f"from {_dotted(small.module)} import ...", _IMPORTS_WHY)
        return updated_node

    def unused_import(self, statement: cst.SimpleStatementLine) -> bool:
        """A module-level tensorflow import none of whose names the module reads is removed
        (reported)."""
        if (
            len(statement.body) != 1
            or not isinstance(statement.body[0], (cst.Import, cst.ImportFrom))
            or not any(statement is s for s in self.module.body)
        ):
            return False
        small = statement.body[0]
        if isinstance(small, cst.ImportFrom):
            if small.relative or isinstance(small.names, cst.ImportStar):
                return False
            module = _dotted(small.module)
        else:
            module = _dotted(small.names[0].name)
        if (
            _tensorflow_module(module).split(".")[0] != "tensorflow"
            or _imported_names(small) & self.uses
        ):
            return False
        shown = f"from {module} import ..." if isinstance(small, cst.ImportFrom) else _code(small)
        self.translated(statement, shown, "(removed: its names are not used)")
        return True

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        """The tensorflow imports replaced by the torch ones the translations need; an import
        whose names the untranslated uses still read is kept, under a comment saying so."""
        updated_node = updated_node.with_changes(
            body=[s for s in updated_node.body if id(s) not in self.unused]
        )
        if not self.tf_imports:
            return updated_node
        originals = [s for s in original_node.body if id(s) not in self.unused]
        indices = [
            next(i for i, s in enumerate(originals) if s is statement)
            for statement in self.tf_imports
        ]
        body = list(updated_node.body)
        olds = [cst.ensure_type(body[i], cst.SimpleStatementLine) for i in indices]
        shown = [updated_node.code_for_node(old.body[0]) for old in olds]
        present = {updated_node.code_for_node(s).strip() for s in body}
        lines = _import_lines(self.needed, present)
        new = [cst.parse_statement(text) for text in lines]
        kept = [bool(_imported_names(old.body[0]) & self.still_used) for old in olds]
        why = f"{KEPT} {self.remaining} untranslated use(s) of tensorflow remain, marked '{MARK}'"
        for index, old, statement, original, keep in zip(
            indices, olds, shown, self.tf_imports, kept, strict=True
        ):
            if keep:
                self.entries.append(
                    Entry(self.line(original), "<module>", "flagged", statement, why=why)
                )
                above = cst.EmptyLine(comment=cst.Comment(f"{MARK} {statement} {why}"))
                body[index] = old.with_changes(leading_lines=[*old.leading_lines, above])
        if lines or not kept[0]:
            self.translated(self.tf_imports[0], shown[0], "; ".join(lines) or "(removed)")
        for statement, original, keep in list(zip(shown, self.tf_imports, kept, strict=True))[1:]:
            if not keep:
                self.translated(original, statement, "(removed)")
        if kept[0]:  # the new imports after it
            replaced: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = [
                body[indices[0]],
                *new,
            ]
        else:  # the first new import takes its comments
            if new:
                new[0] = olds[0].with_changes(
                    body=cst.ensure_type(new[0], cst.SimpleStatementLine).body
                )
            replaced = list(new)
        for index, keep in reversed(list(zip(indices[1:], kept[1:], strict=True))):
            if not keep:
                del body[index]
        body[indices[0] : indices[0] + 1] = replaced
        return updated_node.with_changes(body=body)

    def tf_name(self, node: cst.BaseExpression) -> str | None:
        """`reduce_sum` for `tf.reduce_sum` (tf an alias of tensorflow), `nn.relu` for `nn.relu`
        (`from tensorflow import nn`), `custom_gradient` for `custom_gradient` (imported from
        tensorflow), else None."""
        parts = []
        while isinstance(node, cst.Attribute):
            parts.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name):
            return None
        if node.value in self.aliases and parts:
            prefix = self.aliases[node.value]
            name = ".".join([*([prefix] if prefix else []), *reversed(parts)])
            v1 = name.removeprefix("compat.v1.")
            if v1 != name and name not in TABLE:  # tf.compat.v1.NAME: the same as tf.NAME?
                first = v1.split(".")[0]
                same = first in V1_ALIASES or first == "keras"  # tf.compat.v1.keras is tf.keras
                return V1_ALIASES.get(v1, v1 if same else name)
            return name
        if node.value in self.direct and not parts:
            return self.direct[node.value]
        return None

    def foreign_use(self, original: cst.CSTNode, node: cst.BaseExpression) -> None:
        """Flag a use of a name bound by a tensorflow import that is not translated."""
        root = node
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and root.value in self.foreign:
            # a name of a translated import keeps it: a use left untranslated
            report = self.untranslated if root.value in self.partial else self.flag
            report(
                original,
                _dotted(node) or root.value,
                f"`{root.value}` comes from `{self.foreign[root.value]}`, whose import is not "
                "translated",
            )
