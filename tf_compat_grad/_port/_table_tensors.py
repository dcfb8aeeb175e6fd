"""The translation table's rules for the library's decorators, tensors and variables
(construction, casts, shapes as values) and dtypes."""

from __future__ import annotations

from ._rule import Rule, _dtype, _like, _v

# TF's dtypes with a torch dtype of the same name.
DTYPES = (
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)

TENSOR_RULES: tuple[Rule, ...] = (
    # --- the library's decorators -------------------------------------------------------
    Rule(
        ("custom_gradient",),
        value="custom_gradient",
        note="f and grad_fn are kept as they are, `variables=` signatures included.",
    ),
    Rule(("recompute_grad",), value="recompute_grad"),
    Rule(("grad_pass_through",), value="grad_pass_through"),
    # --- tensors and variables ----------------------------------------------------------
    Rule(
        ("constant",),
        ("value", "dtype", "shape", "name"),
        (
            _v("torch.tensor({value}, dtype={dtype})", "value:literal"),
            _v("torch.tensor({value}, dtype=torch.int32)", "value:ints"),
            _v("torch.tensor({value})", "value:literal"),
            _v("tf_ops.convert_to_tensor({value}, dtype={dtype})"),
            _v("tf_ops.convert_to_tensor({value})"),
        ),
        note="Literal ints get `dtype=torch.int32`, TF's choice (torch's is int64); literal "
        "floats get torch's default dtype (float32 unless changed; TF: float32); other values "
        "TF's dtype rules through `tf_ops.convert_to_tensor`.",
        otherwise="`shape=` is not translated",
    ),
    Rule(
        ("Variable",),
        (
            "initial_value",
            "trainable",
            "validate_shape",
            "caching_device",
            "name",
            "variable_def",
            "dtype",
        ),
        (
            _v(
                "nn.Parameter(torch.tensor({initial_value}, dtype={dtype}))",
                "initial_value:literal",
            ),
            _v("nn.Parameter(torch.tensor({initial_value}))", "initial_value:literal"),
            _v("nn.Parameter(torch.as_tensor({initial_value}, dtype={dtype}))"),
            _v("nn.Parameter({initial_value})"),
            *(
                _v(v.template[:-1] + ", requires_grad=False)", "trainable=False", *v.when)
                for v in (
                    _v(
                        "nn.Parameter(torch.tensor({initial_value}, dtype={dtype}))",
                        "initial_value:literal",
                    ),
                    _v("nn.Parameter(torch.tensor({initial_value}))", "initial_value:literal"),
                    _v("nn.Parameter(torch.as_tensor({initial_value}, dtype={dtype}))"),
                    _v("nn.Parameter(torch.as_tensor({initial_value}))"),
                )
            ),
        ),
        flags={"trainable": True},
        value="nn.Parameter",
        note="A Parameter (also in `isinstance`), found by `variables=` as TF finds the "
        "variable; `trainable=False` gives one with `requires_grad=False`, which `variables=` "
        "leaves out as TF does, and which a module still saves and moves.",
        otherwise="only `initial_value` and `dtype` are translated",
    ),
    Rule(
        ("cast", "dtypes.cast"),
        ("x", "dtype", "name"),
        (
            _v("torch.tensor({x}, dtype={dtype})", "x:intlike"),
            _v("torch.as_tensor({x}).to({dtype})"),
        ),
        note="Float to int truncates toward zero in both. The gradient is cast back, as in TF. "
        "A known Python int (`tf.shape(x)[i]`, now a size) becomes a tensor; `as_tensor` "
        "makes other Python numbers tensors as TF does (floats through float32, as TF's "
        "conversion) and returns a tensor itself.",
    ),
    Rule(
        ("identity",),
        ("input", "name"),
        (_v("{input}.clone()"),),
        note="A new tensor; the gradient passes through.",
    ),
    Rule(
        ("stop_gradient",),
        ("input", "name"),
        (_v("{input}.detach()"),),
        note="Inside grad_fn this also cuts the second derivative, as in TF.",
    ),
    _like("ones_like"),
    _like("zeros_like"),
    Rule(
        ("shape",),
        ("input", "out_type", "name"),
        (
            _v("{input}.shape", "subscripted"),
            _v("torch.tensor({input}.shape, dtype={out_type})"),
            _v("torch.tensor({input}.shape, dtype=torch.int32)"),
        ),
        note="Indexed, `tf.shape(x)[i]` -> `x.shape[i]` (a Python int), and as the shape of "
        "`tf.reshape`, `tf.ones`, `tf.zeros`, `tf.fill`; elsewhere an int32 tensor, as TF's "
        "(a whole `torch.Size` is a tuple: `* 2` would repeat it).",
    ),
    Rule(
        ("convert_to_tensor",),
        ("value", "dtype", "dtype_hint", "name"),
        (
            _v("torch.tensor({value}, dtype={dtype})", "value:literal"),
            _v("torch.tensor({value}, dtype=torch.int32)", "value:ints"),
            _v("torch.tensor({value})", "value:literal"),
            _v("tf_ops.convert_to_tensor({value}, dtype={dtype})"),
            _v("tf_ops.convert_to_tensor({value}, dtype_hint={dtype_hint})"),
            _v("tf_ops.convert_to_tensor({value})"),
        ),
        note="As `tf.constant` for literals; otherwise TF's dtype rules (Python ints int32, "
        "floats float32; a tensor as it is) through `tf_ops.convert_to_tensor`.",
    ),
    Rule(
        ("nn.sigmoid_cross_entropy_with_logits",),
        ("labels", "logits", "name"),
        (_v("tf_ops.sigmoid_cross_entropy_with_logits({labels}, {logits})"),),
        note="TF's formula, `max(x, 0) - x * z + log1p(exp(-abs(x)))` with its `where`s (at "
        "x = 0 the gradient is 0.5 - z, as TF), labels differentiable too.",
    ),
    Rule(
        ("size",),
        ("input", "out_type", "name"),
        (
            _v("torch.tensor({input}.numel(), dtype={out_type})"),
            _v("torch.tensor({input}.numel(), dtype=torch.int32)"),
        ),
        note="An int32 tensor (unless `out_type=`), as TF.",
    ),
    Rule(
        ("rank",),
        ("input", "name"),
        (_v("torch.tensor({input}.dim(), dtype=torch.int32)"),),
        note="An int32 tensor, as TF.",
    ),
    Rule(("Tensor",), value="torch.Tensor", note="In annotations and `isinstance`."),
    Rule(
        ("dtypes.as_dtype", "as_dtype"),
        ("type_value",),
        (_v("tf_ops.as_dtype({type_value})"),),
        note="A torch dtype from a dtype or its name.",
    ),
    Rule(("newaxis",), value="None", note="`x[:, tf.newaxis]` -> `x[:, None]`."),
    # --- control flow, as TF runs it eagerly -------------------------------------------
    Rule(
        ("while_loop",),
        value="tf_ops.while_loop",
        note="A Python loop: `loop_vars = body(*loop_vars)` while `cond(*loop_vars)`, then "
        "Python numbers become tensors with TF's dtypes. TF1's `while_loop` (another return "
        "structure) is not translated.",
    ),
    Rule(
        ("control_dependencies",),
        value="tf_ops.control_dependencies",
        note="A context that adds nothing (eager ops run in order), calling the callables in "
        "`control_inputs`, as in TF's eager mode.",
    ),
    Rule(
        ("name_scope", "compat.v1.name_scope", "compat.v1.variable_op_scope"),
        value="tf_ops.name_scope",
        note="A context that changes nothing (torch ops have no names), giving the scope's "
        "name, `'name/'`, to `as`.",
    ),
    Rule(
        ("device", "compat.v1.device"),
        value="tf_ops.device",
        note="A context that changes nothing: torch runs an op where its inputs are (TF "
        "places the block's ops on the device; the numbers are the same).",
    ),
    Rule(
        ("executing_eagerly", "compat.v1.executing_eagerly_outside_functions"),
        (),
        (_v("True"),),
        note="True: the port runs everything eagerly (`tf.function` is removed), so the "
        "eager branch of code that asks is the one taken.",
    ),
    Rule(
        ("gradients", "compat.v1.gradients"),
        value="tf_ops.gradients",
        note="`torch.autograd.grad` of the graph torch recorded: the sum of `ys` (weighted by "
        "`grad_ys`) differentiated with respect to each of `xs`, a list with None for an "
        "unconnected x (zeros with `unconnected_gradients='zero'`), differentiable again. An x "
        "that does not require grad in torch raises (torch recorded nothing for it; TF's graph "
        "records every tensor).",
    ),
    Rule(
        ("cond", "compat.v1.cond"),
        value="tf_ops.cond",
        note="The branch the predicate picks is called, as TF runs `cond` eagerly.",
    ),
    Rule(("nest.map_structure",), value="tf_ops.map_structure", note="In `tf.nest`'s order."),
    Rule(("nest.flatten",), value="tf_ops.nest_flatten", note="In `tf.nest`'s order."),
    Rule(("nest.pack_sequence_as",), value="tf_ops.pack_sequence_as"),
    Rule(
        ("debugging.check_numerics", "compat.v1.check_numerics"),
        value="tf_ops.check_numerics",
        note="Raises (a ValueError, `tf_ops.InvalidArgumentError`) on a NaN or infinity, in "
        "the tensor and in its gradient, as TF does; returns the tensor.",
    ),
    Rule(("debugging.assert_all_finite",), value="tf_ops.assert_all_finite"),
    *(
        Rule(
            (f"debugging.{name}", name),
            value=f"tf_ops.{name}",
            note="Raises (`tf_ops.InvalidArgumentError`) when the condition fails, as TF's eager "
            "call; returns None.",
        )
        for name in (
            "assert_equal",
            "assert_none_equal",
            "assert_greater",
            "assert_greater_equal",
            "assert_less",
            "assert_less_equal",
            "assert_positive",
            "assert_negative",
            "assert_non_negative",
            "assert_non_positive",
        )
    ),
    Rule(("debugging.Assert", "Assert"), value="tf_ops.Assert"),
    Rule(("ensure_shape",), value="tf_ops.ensure_shape", note="None matches any size."),
    # --- dtypes -------------------------------------------------------------------------
    *(_dtype(name) for name in DTYPES),
    _dtype("half", "float16"),
    _dtype("double", "float64"),
)
