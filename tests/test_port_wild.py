"""`python -m tf_compat_grad port` on public TensorFlow custom-gradient code it was not written
for (tests/port_corpus/wild: each file's header names its source).

Each file is ported with `port_source`, with no hand edit, executed without TensorFlow, and its
outputs, gradients and second-order gradients are compared with the numbers TensorFlow 2.21 gave
(tests/port_corpus/wild/tf_reference.json, written by
`python tests/port_corpus/record_tf.py tests/port_corpus/wild`). A Keras layer is built by a first
call, given the recorded weights by attribute path, and called again.

Files the translator cannot translate yet are listed in NOT_YET with what they need: each is a
strict xfail that only a translation keeping TensorFlow satisfies (`NotTranslated`), so a file
that starts to pass fails the run until it is taken off the list, and one that translates but
gives other numbers, or crashes, fails as any other file does. Every float argument requires
grad: where f captures one from the function around it, the port writes
`@custom_gradient(captured="constant")`, which gives it TensorFlow's gradient (none through f's
output, grad_fn's own use of it at second order).
"""

from __future__ import annotations

import functools
import json
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

pytest.importorskip("libcst")

from helpers import flatten

from tf_compat_grad.port import port_source

WILD = Path(__file__).resolve().parent / "port_corpus" / "wild"
REFERENCE = json.loads((WILD / "tf_reference.json").read_text(encoding="utf-8"))
TOLERANCE = {  # (rtol, atol) by the dtype computed in
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-6),
}

# file -> what the translator needs before the file ports with no hand edit.
NOT_YET: dict[str, str] = {}


class NotTranslated(Exception):
    """The translation still imports TensorFlow: the report says which lines were left."""


@functools.cache
def ported(file: str) -> types.ModuleType:
    """The translation run as a module: it must not need TensorFlow."""
    result = port_source((WILD / file).read_text(encoding="utf-8"), file)
    if "import tensorflow" in result.code:
        raise NotTranslated(result.text(file))
    module = types.ModuleType(f"ported_wild_{Path(file).stem}")
    exec(compile(result.code, f"<ported {file}>", "exec"), module.__dict__)
    return module


def argument(spec: Any) -> Any:
    """A recorded argument: a Python number, or a tensor (float64 unless it says otherwise)
    that requires grad."""
    if isinstance(spec, dict) and "py" in spec:
        return spec["py"]
    if isinstance(spec, dict):
        values, dtype = spec["tensor"], getattr(torch, spec["dtype"])
    else:
        values, dtype = spec, torch.float64
    return torch.tensor(values, dtype=dtype, requires_grad=True)


def attribute(obj: Any, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), obj)


def callable_and_parameters(
    module: types.ModuleType, name: str, case: dict[str, Any], args: list[Any]
) -> tuple[Any, list[torch.Tensor]]:
    """The ported function, or the ported layer built and given the recorded weights, and the
    parameters TF differentiated with respect to, in the recorded order."""
    if "weights" not in case:
        parameters = [v for _, v in sorted(vars(module).items()) if isinstance(v, nn.Parameter)]
        return functools.partial(getattr(module, name), **case.get("kwargs", {})), parameters
    layer = getattr(module, name)(*case["layer"].get("init", ()))
    kwargs = case["layer"].get("call_kwargs", {})
    call = getattr(layer, case["layer"]["method"]) if "method" in case["layer"] else layer
    call(*args, **kwargs)  # builds lazily created weights, as Keras does
    with torch.no_grad():
        for path, values in case["weights"].items():
            weight = attribute(layer, path)
            weight.copy_(torch.tensor(values, dtype=weight.dtype))
    return functools.partial(call, **kwargs), [attribute(layer, p) for p in case["trainable"]]


def assert_matches(
    actual: torch.Tensor | None, expected: Any, what: str, gradient: bool = False
) -> None:
    if expected is None:  # TF: no gradient, which is a zero gradient
        assert actual is None or not actual.any(), f"{what}: TF has no gradient, torch {actual}"
        return
    assert actual is not None, f"{what}: torch has no gradient, TF {expected}"
    want = torch.tensor(expected, dtype=actual.dtype)
    if gradient and want.shape != actual.shape and want.numel() == actual.numel():
        # TF hands grad_fn's gradient back in the shape grad_fn gave it (a 0-d gradient for a
        # shape-[1] input); torch's engine gives every gradient its input's shape, which the
        # library does by expanding it (docs/tensorflow_semantics.md, item 29): the same values.
        assert torch.broadcast_shapes(want.shape, actual.shape) == actual.shape, what
        want = want.expand(actual.shape)
    rtol, atol = TOLERANCE[actual.dtype] if actual.is_floating_point() else (0, 0)
    torch.testing.assert_close(
        actual.detach(), want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}"
    )


def weighted_sum(values: Any, weights: list[Any]) -> Any:
    terms = [
        (v * torch.tensor(w, dtype=v.dtype)).sum().to(torch.float64)
        for v, w in zip(values, weights, strict=True)
        if v is not None and w is not None and v.requires_grad
    ]
    return sum(terms) if terms else None


def case_params() -> list[Any]:
    params = []
    for file, functions in REFERENCE["files"].items():
        for name in functions:
            marks = []
            if file in NOT_YET:
                marks = [pytest.mark.xfail(reason=NOT_YET[file], raises=NotTranslated, strict=True)]
            params.append(pytest.param(file, name, marks=marks, id=f"{file}::{name}"))
    return params


@pytest.mark.parametrize(("file", "name"), case_params())
def test_wild_file_ports_and_matches_tensorflow(file: str, name: str) -> None:
    """Translated with no hand edit, run without TensorFlow: TF's outputs and gradients."""
    case = REFERENCE["files"][file][name]
    module = ported(file)
    args = [argument(a) for a in case["args"]]
    fn, parameters = callable_and_parameters(module, name, case, args)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    kept = [j for j, a in enumerate(tensors) if a.requires_grad]  # TF's sources compared
    kept += range(len(tensors), len(tensors) + len(parameters))
    sources = [*(tensors[j] for j in kept[: len(kept) - len(parameters)]), *parameters]

    outputs = flatten(fn(*args))
    assert len(outputs) == len(case["outputs"])
    for i, (output, expected) in enumerate(zip(outputs, case["outputs"], strict=True)):
        assert_matches(output, expected, f"output {i}")
    assert [str(o.dtype).removeprefix("torch.") for o in outputs] == case["dtypes"]

    loss = weighted_sum(outputs, case["upstream"])
    if loss is None:  # no output depends on the inputs
        assert all(g is None for g in case["grads"])
        return
    grads = torch.autograd.grad(loss, sources, allow_unused=True, create_graph=True)
    expected_grads = [case["grads"][j] for j in kept]
    for j, (grad, expected) in enumerate(zip(grads, expected_grads, strict=True)):
        assert_matches(grad, expected, f"gradient {kept[j]}", gradient=True)

    if case["second"] is None:
        return
    target = weighted_sum(grads, [case["vectors"][j] for j in kept])
    second = (
        torch.autograd.grad(target, sources, allow_unused=True)
        if target is not None
        else tuple(None for _ in sources)
    )
    expected_second = [case["second"][j] for j in kept]
    for j, (grad, expected) in enumerate(zip(second, expected_second, strict=True)):
        assert_matches(grad, expected, f"second-order gradient {kept[j]}", gradient=True)


def test_every_wild_file_is_recorded_and_the_list_names_only_wild_files() -> None:
    files = {p.name for p in WILD.glob("*.py")}
    assert files == set(REFERENCE["files"]), "re-record: tests/port_corpus/record_tf.py"
    assert set(NOT_YET) <= files
    assert REFERENCE["tensorflow"] == "2.21.0"


@pytest.mark.parametrize("page", ["README.md", "docs/port.md"])
def test_the_docs_state_the_share_that_ports(page: str) -> None:
    files = set(REFERENCE["files"])
    porting = files - set(NOT_YET)
    text = " ".join((WILD.parents[2] / page).read_text(encoding="utf-8").split())
    assert f"of {len(files)} public tensorflow files that use `tf.custom_gradient`" in text.lower()
    assert f"{len(porting)} translate with no hand edit" in text
