"""The translation table's rules for indices and construction (argmax, one_hot, gather, range,
ones...), shapes (reshape, transpose, concat, pad, squeeze...) and linear algebra."""

from __future__ import annotations

from ._rule import Rule, _unary, _v

SHAPE_RULES: tuple[Rule, ...] = (
    # --- indices and construction ------------------------------------------------------------
    Rule(
        ("argmax", "math.argmax"),
        ("input", "axis", "output_type", "name"),
        (
            _v("torch.argmax({input}, dim={axis}).to({output_type})", "axis:axis"),
            _v("torch.argmax({input}, dim={axis})", "axis:axis"),
            _v("torch.argmax({input}, dim=0)"),
        ),
        note="No axis: axis 0 in TF (torch would flatten). int64, the first of ties, in both.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("argmin", "math.argmin"),
        ("input", "axis", "output_type", "name"),
        (
            _v("torch.argmin({input}, dim={axis}).to({output_type})", "axis:axis"),
            _v("torch.argmin({input}, dim={axis})", "axis:axis"),
            _v("torch.argmin({input}, dim=0)"),
        ),
        note="As `tf.argmax`.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("one_hot",),
        ("indices", "depth", "on_value", "off_value", "axis", "dtype", "name"),
        (
            _v("torch.nn.functional.one_hot({indices}.long(), {depth}).to({dtype})"),
            _v("torch.nn.functional.one_hot({indices}.long(), {depth}).to(torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF. An index outside [0, depth) gives a zero row "
        "in TF and an error in torch.",
        otherwise="only `indices`, `depth` and `dtype` are translated",
    ),
    Rule(
        ("gather",),
        ("params", "indices", "validate_indices", "axis", "batch_dims", "name"),
        (
            _v("{params}[torch.as_tensor({indices}).long()]"),
            _v("tf_ops.gather({params}, {indices}, axis={axis})"),
        ),
        note="Axis 0 by indexing, another axis through `tf_ops.gather`. A negative index is "
        "an error in TF, counts from the end in torch's indexing.",
        otherwise="`batch_dims` is not translated",
    ),
    Rule(
        ("gather_nd",),
        ("params", "indices", "name", "batch_dims"),
        (_v("tf_ops.gather_nd({params}, {indices})"),),
        otherwise="`batch_dims` is not translated",
    ),
    Rule(
        ("scatter_nd",),
        ("indices", "updates", "shape", "name"),
        (_v("tf_ops.scatter_nd({indices}, {updates}, {shape})"),),
        note="Repeated indices sum, as in TF.",
    ),
    *(
        Rule(
            (f"tensor_scatter_nd_{kind}",),
            ("tensor", "indices", "updates", "name"),
            (_v(f"tf_ops.tensor_scatter_nd_{kind}({{tensor}}, {{indices}}, {{updates}})"),),
        )
        for kind in ("update", "add")
    ),
    Rule(
        ("boolean_mask",),
        ("tensor", "mask", "axis", "name"),
        (_v("{tensor}[torch.as_tensor({mask}, dtype=torch.bool)]"),),
        otherwise="`axis` is not translated",
    ),
    Rule(
        ("math.top_k", "nn.top_k"),
        ("input", "k", "sorted", "index_type", "name"),
        (
            _v("tf_ops.top_k({input}, {k})"),
            _v("tf_ops.top_k({input})"),
        ),
        flags={"sorted": True},
        note="`values` and int32 `indices`, largest first, equal entries in index order as "
        "TF orders them (`torch.topk` does not promise an order for ties).",
        otherwise="`sorted=False` and `index_type` are not translated",
    ),
    Rule(
        ("argsort",),
        ("values", "axis", "direction", "stable", "name"),
        (
            _v(
                "torch.argsort({values}, dim={axis}, descending=True, stable=True).to(torch.int32)",
                "direction=DESCENDING",
                "axis:axis",
            ),
            _v(
                "torch.argsort({values}, dim=-1, descending=True, stable=True).to(torch.int32)",
                "direction=DESCENDING",
            ),
            _v("torch.argsort({values}, dim={axis}, stable=True).to(torch.int32)", "axis:axis"),
            _v("torch.argsort({values}, dim=-1, stable=True).to(torch.int32)"),
        ),
        flags={"stable": False},
        strings={"direction": "ASCENDING"},
        note="Ties in index order (stable), int32, as TF.",
        otherwise="`axis` must be a literal int",
    ),
    Rule(("reverse",), ("tensor", "axis", "name"), (_v("torch.flip({tensor}, {axis})"),)),
    Rule(
        ("roll",),
        ("input", "shift", "axis", "name"),
        (_v("torch.roll({input}, {shift}, {axis})"),),
    ),
    Rule(
        ("math.count_nonzero",),
        ("input", "axis", "keepdims", "dtype", "name"),
        (
            _v("torch.count_nonzero({input}, dim={axis})", "axis:axes"),
            _v("torch.count_nonzero({input})"),
        ),
        note="int64, as TF.",
        otherwise="only `axis` (literal) is translated",
    ),
    Rule(
        ("clip_by_global_norm",),
        value="tf_ops.clip_by_global_norm",
        note="TF's formula: each tensor times `clip_norm / max(global_norm, clip_norm)`, and "
        "the global norm.",
    ),
    Rule(("tile",), ("input", "multiples", "name"), (_v("torch.tile({input}, {multiples})"),)),
    Rule(
        ("range",),
        ("start", "limit", "delta", "dtype", "name"),
        (
            _v("torch.arange({start}, dtype={dtype})"),
            _v("torch.arange({start}, {limit}, dtype={dtype})"),
            _v("torch.arange({start}, {limit}, {delta}, dtype={dtype})", "delta:intlike"),
            _v("torch.arange({start}, dtype=torch.int32)", "start:intlike"),
            _v(
                "torch.arange({start}, {limit}, dtype=torch.int32)",
                "start:intlike",
                "limit:intlike",
            ),
            _v(
                "torch.arange({start}, {limit}, {delta}, dtype=torch.int32)",
                "start:intlike",
                "limit:intlike",
                "delta:intlike",
            ),
        ),
        note="Without `dtype=`, integer arguments only (literal ints, sizes, names assigned "
        "only those in the function): int32, as TF (torch's default is int64). With `dtype=`, "
        "an integer step.",
        otherwise="without `dtype=` only integer arguments (literal ints, sizes, names assigned "
        "only those) are translated: TF infers int32 or float32 from them; a float step "
        "accumulates differently",
    ),
    Rule(
        ("ones",),
        ("shape", "dtype", "name"),
        (_v("torch.ones({shape}, dtype={dtype})"), _v("torch.ones({shape}, dtype=torch.float32)")),
        note="float32 unless `dtype=`, as TF.",
    ),
    Rule(
        ("zeros",),
        ("shape", "dtype", "name"),
        (
            _v("torch.zeros({shape}, dtype={dtype})"),
            _v("torch.zeros({shape}, dtype=torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF.",
    ),
    Rule(
        ("fill",),
        ("dims", "value", "name"),
        (
            _v("torch.full({dims}, {value}, dtype=torch.int32)", "value:ints"),
            _v("torch.full({dims}, {value}, dtype=torch.float32)", "value:number"),
        ),
        note="A literal value: int32 or float32, as TF infers.",
        otherwise="only a literal number `value` is translated (TF infers the dtype from it)",
    ),
    # --- shapes and linear algebra ----------------------------------------------------------
    Rule(
        ("matmul", "linalg.matmul"),
        ("a", "b", "transpose_a", "transpose_b"),
        (
            _v("torch.matmul({a}.mT, {b}.mT)", "transpose_a=True", "transpose_b=True"),
            _v("torch.matmul({a}.mT, {b})", "transpose_a=True"),
            _v("torch.matmul({a}, {b}.mT)", "transpose_b=True"),
            _v("torch.matmul({a}, {b})"),
        ),
        flags={"transpose_a": False, "transpose_b": False},
        note="`transpose_a`/`transpose_b` transpose the last two dimensions (`.mT`).",
        otherwise="only `transpose_a` and `transpose_b` are translated (not `adjoint_*`, "
        "`*_is_sparse`, `output_type`)",
    ),
    _unary(("linalg.inv",), "input", "torch.linalg.inv"),
    _unary(("linalg.det",), "input", "torch.linalg.det"),
    _unary(
        ("linalg.logdet",),
        "matrix",
        "torch.logdet",
        "Of a Hermitian positive definite matrix (TF computes it from a Cholesky factor).",
    ),
    _unary(("linalg.cholesky",), "input", "torch.linalg.cholesky"),
    _unary(("linalg.expm",), "input", "torch.linalg.matrix_exp"),
    _unary(
        ("linalg.eigvalsh",),
        "tensor",
        "torch.linalg.eigvalsh",
        "Ascending, from the lower triangle, in both.",
    ),
    Rule(
        ("linalg.slogdet",),
        ("input", "name"),
        (_v("tuple(torch.linalg.slogdet({input}))"),),
        note="`(sign, log|det|)`; the sign has no gradient, `log|det|`'s is `inv(input)^T`, "
        "in both.",
    ),
    Rule(
        ("linalg.svd",),
        ("tensor", "full_matrices", "compute_uv", "name"),
        (
            _v("torch.linalg.svdvals({tensor})", "compute_uv=False"),
            _v("torch.linalg.svdvals({tensor})", "compute_uv=False", "full_matrices=True"),
            _v("tf_ops.svd({tensor}, full_matrices=True)", "full_matrices=True"),
            _v("tf_ops.svd({tensor})"),
        ),
        flags={"full_matrices": False, "compute_uv": True},
        note="TF's `(s, u, v)` with `tensor = u @ diag(s) @ v^H` (torch: `(U, S, Vh)`). The "
        "signs of singular vectors are LAPACK's, which may differ from TF's; what does not "
        "depend on them (`u @ diag(s) @ v^H`, `det(u) * det(v)`, `s`) is the same.",
    ),
    Rule(
        ("linalg.set_diag",),
        ("input", "diagonal", "name", "k", "align"),
        (_v("torch.diagonal_scatter({input}, {diagonal}, dim1=-2, dim2=-1)"),),
        note="The main diagonal of the last two dimensions replaced.",
        otherwise="only the main diagonal (no `k`, `align`) is translated",
    ),
    Rule(
        ("linalg.band_part",),
        ("input", "num_lower", "num_upper", "name"),
        (_v("tf_ops.band_part({input}, {num_lower}, {num_upper})"),),
        note="A negative bound keeps that whole triangle, as TF.",
    ),
    Rule(
        ("linalg.adjoint",),
        ("matrix", "name"),
        (_v("{matrix}.mH"),),
        note="The conjugate transpose of the last two dimensions.",
    ),
    Rule(
        ("linalg.matvec",),
        ("a", "b", "transpose_a", "adjoint_a", "a_is_sparse", "b_is_sparse", "name"),
        (
            _v("torch.matmul({a}.mT, {b}.unsqueeze(-1)).squeeze(-1)", "transpose_a=True"),
            _v("torch.matmul({a}, {b}.unsqueeze(-1)).squeeze(-1)"),
        ),
        flags={"transpose_a": False},
        otherwise="only `transpose_a` is translated",
    ),
    Rule(
        ("linalg.cross",),
        ("a", "b", "name"),
        (_v("torch.linalg.cross({a}, {b})"),),
        note="Along the last dimension (of size 3).",
    ),
    Rule(
        ("linalg.triangular_solve",),
        ("matrix", "rhs", "lower", "adjoint", "name"),
        (
            _v("torch.linalg.solve_triangular({matrix}, {rhs}, upper=False)"),
            _v("torch.linalg.solve_triangular({matrix}, {rhs}, upper=True)", "lower=False"),
        ),
        flags={"lower": True, "adjoint": False},
        otherwise="`adjoint=True` and a `lower` that is not a literal are not translated",
    ),
    Rule(
        ("linalg.trace", "trace"),
        ("x", "name"),
        (_v("torch.diagonal({x}, dim1=-2, dim2=-1).sum(-1)"),),
        note="Of the last two dimensions (batched), as TF.",
    ),
    Rule(
        ("linalg.diag_part",),
        ("input", "name", "k", "padding_value", "align"),
        (_v("torch.diagonal({input}, dim1=-2, dim2=-1)"),),
        note="The main diagonal of the last two dimensions.",
        otherwise="only the main diagonal (no `k`, `padding_value`, `align`) is translated",
    ),
    Rule(
        ("linalg.diag",),
        ("diagonal", "name", "k", "num_rows", "num_cols", "padding_value", "align"),
        (_v("torch.diag_embed({diagonal})"),),
        note="Batched: the last dimension becomes a diagonal matrix.",
        otherwise="only the main diagonal (no `k`, `num_rows`, ...) is translated",
    ),
    Rule(
        ("linalg.matrix_transpose", "linalg.transpose"),
        ("a", "name", "conjugate"),
        (_v("{a}.mT"),),
        flags={"conjugate": False},
        otherwise="`conjugate=True` is not translated",
    ),
    Rule(
        ("linalg.solve",),
        ("matrix", "rhs", "adjoint", "name"),
        (
            _v("torch.linalg.solve({matrix}.mT, {rhs})", "adjoint=True"),
            _v("torch.linalg.solve({matrix}, {rhs})"),
        ),
        flags={"adjoint": False},
        note="`rhs` is a matrix (`[..., M, K]`) in both.",
    ),
    Rule(
        ("eye", "linalg.eye"),
        ("num_rows", "num_columns", "batch_shape", "dtype", "name"),
        (
            _v("torch.eye({num_rows}, {num_columns}, dtype={dtype})"),
            _v("torch.eye({num_rows}, dtype={dtype})"),
            _v("torch.eye({num_rows}, {num_columns}, dtype=torch.float32)"),
            _v("torch.eye({num_rows}, dtype=torch.float32)"),
        ),
        note="float32 unless `dtype=`, as TF.",
        otherwise="`batch_shape` is not translated",
    ),
    Rule(
        ("reshape",),
        ("tensor", "shape", "name"),
        (
            _v("torch.reshape({tensor}, list({shape}))", "shape:name"),
            _v("torch.reshape({tensor}, {shape})"),
        ),
        note="A whole `tf.shape(x)` as the shape becomes `x.shape` (also in `tf.ones`, "
        "`tf.zeros`, `tf.fill`); a shape held in a name (an int tensor, as `tf.shape(x)` "
        "stored, or a list) is passed as a list.",
    ),
    Rule(
        ("einsum", "linalg.einsum"),
        value="torch.einsum",
        note="The same equations (ellipsis included); the operands are passed as they are.",
    ),
    Rule(
        ("transpose",),
        ("a", "perm", "conjugate", "name"),
        (
            _v("torch.permute({a}, {perm})"),
            _v("{a}.permute(*range({a}.dim() - 1, -1, -1))"),
        ),
        flags={"conjugate": False},
        note="Without `perm`, all dimensions are reversed, as in TF.",
        otherwise="`conjugate=True` is not translated",
    ),
    Rule(("concat",), ("values", "axis", "name"), (_v("torch.cat({values}, dim={axis})"),)),
    Rule(
        ("stack",),
        ("values", "axis", "name"),
        (_v("torch.stack({values}, dim={axis})"), _v("torch.stack({values})")),
    ),
    Rule(
        ("broadcast_to",),
        ("input", "shape", "name"),
        (_v("torch.broadcast_to({input}, {shape})"),),
        note="The gradient sums over the broadcast dimensions, in both.",
    ),
    Rule(
        ("tensordot", "linalg.tensordot"),
        ("a", "b", "axes", "name"),
        (_v("torch.tensordot({a}, {b}, dims={axes})"),),
        note="`axes` an int (the last N of a with the first N of b) or two lists, in both.",
    ),
    Rule(
        ("pad",),
        ("tensor", "paddings", "mode", "constant_values", "name"),
        (
            _v(
                "torch.nn.functional.pad({tensor}, [p for pair in reversed({paddings}) "
                "for p in pair], value={constant_values})"
            ),
            _v(
                "torch.nn.functional.pad({tensor}, [p for pair in reversed({paddings}) "
                "for p in pair])"
            ),
        ),
        strings={"mode": "CONSTANT"},
        note="TF's `[[before, after], ...]` from the first dimension becomes torch's flat list "
        "from the last. Constant mode only.",
        otherwise="only the default CONSTANT mode is translated (REFLECT and SYMMETRIC differ "
        "from torch's modes at the edges)",
    ),
    Rule(
        ("nn.l2_loss",),
        ("t", "name"),
        (_v("torch.sum(torch.square({t})) / 2"),),
        note="`sum(t ** 2) / 2`, as TF.",
    ),
    Rule(
        ("nn.bias_add",),
        ("value", "bias", "data_format", "name"),
        (_v("{value} + {bias}"),),
        note="The default data_format adds the bias along the last dimension: broadcasting.",
        otherwise="`data_format=` is not translated (NCHW adds along dimension 1)",
    ),
    Rule(
        ("nn.embedding_lookup",),
        ("params", "ids", "max_norm", "name"),
        (_v("{params}[torch.as_tensor({ids}).long()]"),),
        note="One params tensor (a sharded list is an error in torch), as `tf.gather`.",
        otherwise="`max_norm` is not translated",
    ),
    Rule(
        ("sort",),
        ("values", "axis", "direction", "name"),
        (
            _v(
                "torch.sort({values}, dim={axis}, descending=True, stable=True).values",
                "direction=DESCENDING",
                "axis:axis",
            ),
            _v(
                "torch.sort({values}, dim=-1, descending=True, stable=True).values",
                "direction=DESCENDING",
            ),
            _v("torch.sort({values}, dim={axis}, stable=True).values", "axis:axis"),
            _v("torch.sort({values}, dim=-1, stable=True).values"),
        ),
        strings={"direction": "ASCENDING"},
        note="Stable, so that tied values take their gradients in TF's order (TF sorts with "
        "`top_k`, lower indices first).",
        otherwise="`axis` must be a literal int",
    ),
    Rule(
        ("expand_dims",),
        ("input", "axis", "name"),
        (_v("torch.unsqueeze({input}, {axis})"),),
    ),
    Rule(
        ("squeeze",),
        ("input", "axis", "name"),
        (_v("torch.squeeze({input}, dim={axis})"), _v("torch.squeeze({input})")),
        note="TF raises for an axis whose size is not 1; torch leaves it.",
    ),
    Rule(
        ("unstack",),
        ("value", "num", "axis", "name"),
        (
            _v("list(torch.unbind({value}, dim={axis}))", "axis:axis"),
            _v("list(torch.unbind({value}))"),
        ),
        note="A list of tensors, as TF's.",
        otherwise="`axis` must be a literal int; `num` is not translated",
    ),
    Rule(
        ("split",),
        ("value", "num_or_size_splits", "axis", "num", "name"),
        (  # a literal int is a count of parts (first: it has the `axes` fact too)
            _v(
                "list(torch.tensor_split({value}, {num_or_size_splits}, dim={axis}))",
                "num_or_size_splits:axis",
                "axis:axis",
            ),
            _v(
                "list(torch.tensor_split({value}, {num_or_size_splits}))",
                "num_or_size_splits:axis",
            ),
            _v(
                "list(torch.split({value}, {num_or_size_splits}, dim={axis}))",
                "num_or_size_splits:axes",
                "axis:axis",
            ),
            _v("list(torch.split({value}, {num_or_size_splits}))", "num_or_size_splits:axes"),
        ),
        note="A literal list of sizes; a literal count of equal parts becomes "
        "`torch.tensor_split` (TF raises when the count does not divide the size, torch gives "
        "unequal parts).",
        otherwise="`num_or_size_splits` must be a literal list of sizes or a literal count, "
        "`axis` a literal int",
    ),
    Rule(("print",), value="print", note="Tensors print as torch prints them."),
)
