"""The statements the port translates or removes whole: a `with tf.GradientTape()` block (the
pattern `_tape` checks) and its `tape.gradient` calls, a `with tf.name_scope(...)` block (its
body kept), and an expression statement that switches TF's execution mode or writes a summary.
"""

from __future__ import annotations

import libcst as cst

from . import _tape
from ._arguments import _simple
from ._captures import _Captures
from ._rule import placeholders
from ._syntax import _code, _dotted, _Rename
from ._table import MODE_SWITCHES, NAME_SCOPES
from ._template import _Fill


class _Statements(_Captures):
    """The part of the transformer that translates `tf.GradientTape` blocks (the tape's calls
    are dispatched by `_Porter.leave_Call`) and removes the statements torch has no use for."""

    def visit_With(self, node: cst.With) -> None:
        call = node.items[0].item if node.items else None
        alone = len(node.items) == 1 and node.items[0].asname is None
        if isinstance(call, cst.Call) and alone and self.tf_name(call.func) in NAME_SCOPES:
            self.removed |= {id(call), id(node)}  # `with tf.name_scope(...):` -> its body
            return
        if not isinstance(call, cst.Call) or self.tf_name(call.func) != "GradientTape":
            return
        body = self.functions[-1].body if self.functions else self.module
        found = _tape.check(node, body, self.functions, "GradientTape", frozenset(self.variables))
        if isinstance(found, str):
            self.tape_calls[id(call)] = found
            asname = node.items[0].asname
            if asname is not None and isinstance(asname.name, cst.Name):
                for gradient in _tape.gradient_calls(body, asname.name.value)[0]:
                    self.tape_calls[id(gradient)] = (
                        f"the gradient of the untranslated tape of line {self.line(node)}"
                    )
            return
        name, watched, watches = found
        mapping = {w: self.fresh(f"{w}_watched", numbered=True) for w in dict.fromkeys(watched)}
        star = self.functions[-1].params.star_arg if self.functions else None
        sequences = frozenset(
            {star.name.value} & set(watched) if isinstance(star, cst.Param) else ()
        )
        tape = _tape.Tape(name, mapping, node, watches, sequences)
        self.tapes[id(node)] = tape
        self.tape_calls[id(call)] = tape
        for gradient in _tape.gradient_calls(body, name)[0]:
            self.tape_calls[id(gradient)] = tape

    def leave_With(
        self, original_node: cst.With, updated_node: cst.With
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if id(original_node) in self.removed:
            scope = cst.ensure_type(original_node.items[0].item, cst.Call).func
            self.translated(original_node, f"with {_dotted(scope)}", "(removed: names only)")
            return cst.FlattenSentinel(cst.ensure_type(updated_node.body, cst.IndentedBlock).body)
        tape = self.tapes.get(id(original_node))
        if tape is None:
            return updated_node
        body = cst.ensure_type(updated_node.body, cst.IndentedBlock)
        watch = "{0} if {0}.requires_grad else {0}.detach().requires_grad_()"
        assignments = [
            cst.parse_statement(
                f"{new} = tuple({watch.format('t')} for t in {old})"
                if old in tape.sequences
                else f"{new} = {watch.format(old)}"
            )
            for old, new in tape.watched.items()
        ]
        rest = [s.visit(_Rename(tape.watched)) for s in body.body[tape.watches :]]
        first = body.body[0]
        if assignments and isinstance(first, cst.SimpleStatementLine):  # keep its comments
            assignments[0] = cst.ensure_type(assignments[0], cst.SimpleStatementLine).with_changes(
                leading_lines=first.leading_lines
            )
        self.needed.add("torch")
        return updated_node.with_changes(
            items=[cst.WithItem(cst.parse_expression("torch.enable_grad()"))],
            body=body.with_changes(body=[*assignments, *rest]),
        )

    def tape_gradient(
        self, original: cst.Call, call: cst.Call, tape: _tape.Tape
    ) -> cst.BaseExpression:
        positional = [a for a in call.args if a.keyword is None]
        names = ["target", "sources", "output_gradients"][: len(positional)]
        given = {n: a.value for n, a in zip(names, positional, strict=False)}
        given |= {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        sources = given["sources"]
        if _tape.nested(sources) or set(_tape.source_names(sources) or ()) & tape.sequences:
            renamed_sources = cst.ensure_type(sources.visit(_Rename(tape.watched)), type(sources))
            args = {**given, "sources": renamed_sources}
            keyword = ", output_gradients={output_gradients}" if "output_gradients" in given else ""
            template = f"tf_ops.tape_gradient({{target}}, {{sources}}{keyword})"
            result = _Fill(args).fill(template)
            self.translated(original, f"{tape.name}.gradient", _code(result))
            self.needed.add("tf_ops")
            return result
        items = sources.elements if isinstance(sources, (cst.List, cst.Tuple)) else [sources]
        renamed = [
            cst.Element(cst.Name(tape.watched.get(cst.ensure_type(i.value, cst.Name).value, "")))
            if cst.ensure_type(i.value, cst.Name).value in tape.watched
            else cst.Element(i.value)
            for i in (e if isinstance(e, cst.BaseElement) else cst.Element(e) for e in items)
        ]
        upstream = (
            "{output_gradients}" if "output_gradients" in given else ("torch.ones_like({target})")
        )
        template = (
            f"torch.autograd.grad({{target}}, {{sources}}, grad_outputs={upstream}, "
            "create_graph=True, allow_unused=True)"
        )
        if isinstance(sources, cst.List):
            template = f"list({template})"
        elif isinstance(sources, cst.Tuple):
            template = f"tuple({template})"
        else:
            template = f"{template}[0]"
        args = {**given, "sources": cst.List(renamed)}
        used = placeholders(template)
        twice = sorted(p for p in set(used) if used.count(p) > 1 and not _simple(args[p]))
        result = _Fill(args, {p: self.fresh() for p in twice}).fill(template)
        self.translated(original, f"{tape.name}.gradient", _code(result))
        self.needed.add("torch")
        return result

    def visit_Expr(self, node: cst.Expr) -> None:
        """A statement switching TF's execution mode, or writing a summary (`tf.summary.*`, a
        no-op without a default writer; the numbers do not depend on it), is removed."""
        call = node.value
        name = self.tf_name(call.func) if isinstance(call, cst.Call) else None
        if name in MODE_SWITCHES or (name or "").startswith(("summary.", "compat.v1.summary.")):
            self.removed.add(id(call))

    def leave_Expr(
        self, original_node: cst.Expr, updated_node: cst.Expr
    ) -> cst.Expr | cst.RemovalSentinel:
        if id(original_node.value) not in self.removed:
            return updated_node
        shown = _dotted(cst.ensure_type(original_node.value, cst.Call).func)
        why = (
            "torch runs eagerly" if "summary." not in shown else "log with torch.utils.tensorboard"
        )
        self.translated(original_node, shown, f"(removed: {why})")
        return cst.RemoveFromParent()
