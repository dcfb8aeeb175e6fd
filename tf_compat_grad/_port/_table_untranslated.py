"""The translation table's names that no template translates, with the reason: `tf.GradientTape`
and `tf.function` (the transformer translates one pattern of each), integer division, NHWC
convolutions and pools; and random numbers (TF's distributions, torch's generator)."""

from __future__ import annotations

from ._rule import Rule, _flagged, _v

_INTEGER_DIVISION = (
    "truncating division and remainder: TF defines no gradient for them; translate it by "
    'hand (`torch.div(x, y, rounding_mode="trunc")`, `torch.fmod`) if no gradient flows'
)
_NHWC = (
    "NHWC layout: TF's default data_format is channels-last, torch's convolutions and pools "
    "are channels-first; 2-D convolutions and pools are translated (`tf_ops.conv2d`, ...), "
    "the others need the tensors and the filter permuted by hand"
)

# tf.function's parameters: none changes the numbers of the function it wraps.
_FUNCTION_PARAMETERS = (
    "func",
    "input_signature",
    "autograph",
    "jit_compile",
    "reduce_retracing",
    "experimental_implements",
    "experimental_autograph_options",
    "experimental_attributes",
    "experimental_relax_shapes",
    "experimental_compile",
    "experimental_follow_type_hints",
    "name",
)

UNTRANSLATED_RULES: tuple[Rule, ...] = (
    # --- not translated, with the reason ----------------------------------------------------
    Rule(
        ("GradientTape",),
        (),
        note="Translated in one pattern: `with tf.GradientTape() as tape:` (`persistent=` "
        "allowed) opening with `tape.watch(NAME or [NAMES])` (or none, for module-level "
        "`tf.Variable`s), the block reading only watched names, names it assigns, parameters "
        "and module-level names (at module level: functions, imports, variables), and the tape "
        "used after it only as `tape.gradient(target, NAME or [NAMES], output_gradients=)` with "
        "watched names, names the block assigns or variables as sources: "
        "`with torch.enable_grad():`, `x_watched = x if x.requires_grad else "
        "x.detach().requires_grad_()`, and `torch.autograd.grad(target, [x_watched], "
        "grad_outputs=output_gradients or ones, create_graph=True, allow_unused=True)`, "
        "differentiable again as TF's under an outer tape. An unconnected target raises in "
        "torch (TF: None). `tape = tf.GradientTape(...)` then `with tape:` reads as the "
        "`with ... as tape:`; a watched `*args` becomes a tuple of watched tensors; sources "
        "that are a nest of names (`(args, variables)`, grad_fn's `variables` among them) go "
        "to `tf_ops.tape_gradient`, which keeps their structure.",
        otherwise="only `with tf.GradientTape() as tape:` in the pattern of the note is translated",
    ),
    Rule(
        ("function",),
        _FUNCTION_PARAMETERS,
        (_v("{func}"),),
        drop=_FUNCTION_PARAMETERS[1:],
        note="`@tf.function` (with or without arguments) is removed and `tf.function(f, ...)` "
        "becomes `f`: the function runs eagerly, with the numbers of TF's eager mode "
        "(autograph keeps Python semantics; `input_signature=` only restricts the calls TF "
        "accepts, `jit_compile=` only changes how TF compiles); "
        "`torch.compile(fn, fullgraph=True)` is torch's counterpart.",
        otherwise="`tf.function(f)` needs the function",
    ),
    *(
        Rule(
            (f"random.{name}",),
            value=f"tf_ops.{target}",
            note="TF's arguments and distribution, torch's generator: other numbers than TF's "
            "for the same seed (`seed=` is not used; seed torch). Where numbers must match, "
            "pass the noise in.",
        )
        for name, target in (
            ("uniform", "random_uniform"),
            ("normal", "random_normal"),
            ("truncated_normal", "truncated_normal"),
        )
    ),
    Rule(
        ("random.set_seed", "compat.v1.set_random_seed", "compat.v1.random.set_random_seed"),
        ("seed",),
        (_v("torch.manual_seed({seed})"),),
        note="Seeds torch's generator: reproducible runs, other numbers than TF's.",
    ),
    _flagged(
        ("random.categorical", "random.shuffle"),
        "random numbers: TF's and torch's generators give different numbers for the same "
        "seed; use torch's (`torch.multinomial`, `torch.randperm`) and compare statistics",
    ),
    _flagged(
        ("math.truncatediv", "truncatediv", "math.truncatemod", "truncatemod"), _INTEGER_DIVISION
    ),
    _flagged(
        (
            "nn.conv1d",
            "nn.conv3d",
            "nn.depthwise_conv2d",
            "nn.max_pool1d",
            "nn.avg_pool1d",
        ),
        _NHWC,
    ),
)
