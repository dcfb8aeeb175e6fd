"""One function per translated op, differentiated by autodiff: the op's value and its
gradients (TF's gradient rules against torch's) must agree, ties and zeros included."""

import tensorflow as tf


def reduce_sum_all(x):
    return tf.reduce_sum(x, name="total")  # name= is dropped


def reduce_sum_axis_keepdims(x):
    return tf.reduce_sum(x, axis=1, keepdims=True)


def reduce_mean_axes(x):
    return tf.math.reduce_mean(x, axis=[0, 1])


def reduce_mean_keepdims_all(x):
    return tf.reduce_mean(x, keepdims=True)


def reduce_max_ties(x):
    return tf.reduce_max(x, axis=-1)


def reduce_min_all(x):
    return tf.reduce_min(x)


def reduce_prod_with_zero(x):
    return tf.reduce_prod(x, axis=0)


def cast_roundtrip(x):
    return tf.cast(tf.cast(x, tf.float32), tf.float64) * x


def where_three(x, y):
    return tf.where(x > y, x * y, y - x)


def where_number(x):
    return tf.where(x > 0, x, 0.0)


def clip_by_value_ties(x):
    return tf.clip_by_value(x, -1.0, 1.0)


def clip_by_norm_all(x):
    return tf.clip_by_norm(x, 2.0)


def clip_by_norm_small(x):
    return tf.clip_by_norm(x, 100.0)


def divide_no_nan_zero(x, y):
    return tf.math.divide_no_nan(x, y)


def identity_and_stop(x):
    return tf.identity(x) * tf.stop_gradient(x)


def ones_and_zeros_like(x):
    return x * tf.ones_like(x) + tf.zeros_like(x, dtype=tf.float64)


def maximum_number(x):
    return tf.maximum(x, 0.0)


def maximum_number_first(x):
    return tf.maximum(0.0, x)


def maximum_tensors(x, y):
    return tf.maximum(x, y)


def minimum_number(x):
    return tf.minimum(x, 0.5)


def minimum_tensors(x, y):
    return tf.math.minimum(x, y)


def activations(x):
    return tf.nn.relu(x) + tf.sigmoid(x) + tf.tanh(x) + tf.nn.softplus(x)


def softplus_large(x):
    return tf.nn.softplus(x)


def sign_round_abs(x):
    return tf.sign(x) + tf.round(x) + tf.abs(x)


def exp_logs(x):
    return tf.exp(x) + tf.math.log(x) + tf.math.log1p(x) + tf.math.expm1(x)


def sqrt_square(x):
    return tf.sqrt(x) + tf.square(x)


def matmul_plain(a, b):
    return tf.matmul(a, b)


def matmul_transposed(a, b):
    return tf.matmul(a, b, transpose_a=True, transpose_b=True)


def reshape_transpose(x):
    return tf.transpose(tf.reshape(x, [3, 2]), perm=[1, 0])


def transpose_reverse(x):
    return tf.transpose(x)


def concat_stack(x, y):
    return tf.concat([x, y], axis=0), tf.stack([x, y], 1)  # axis given by position


def expand_squeeze(x):
    return tf.squeeze(tf.expand_dims(x, 0) * 2.0, axis=0)


def shape_index(x):
    return x * tf.cast(tf.shape(x)[1], tf.float64)


def constants(x):
    return x * tf.constant([1.5, -2.0], dtype=tf.float64) + tf.constant(0.25, dtype=x.dtype)


def comparisons(x, y):
    return tf.cast(tf.equal(x, y), x.dtype) + tf.cast(tf.greater(x, y), x.dtype) * x


def where_one_argument(x):
    return tf.where(x > 0.5)


def minimum_number_first(x):
    return tf.minimum(1.0, x)


def maximum_nan(x, y):
    return tf.maximum(x, y)


def constant_literals(x):
    ints = tf.constant([1, 2])
    floats = tf.constant([0.5, 1.25])
    return tf.cast(ints, x.dtype) * x + tf.cast(floats, tf.float64), ints, floats


def annotated(x: tf.Tensor) -> tf.Tensor:
    return tf.expand_dims(x, 0)[:, tf.newaxis]


def softmax_default_axis(x):
    return tf.nn.softmax(x), tf.nn.log_softmax(x, axis=0), tf.math.softmax(x, axis=-1)


def logsumexp_all_and_axis(x):
    return tf.math.reduce_logsumexp(x), tf.reduce_logsumexp(x, axis=0, keepdims=True)


def logsumexp_minus_inf(x):
    return tf.math.reduce_logsumexp(x, axis=1)


def softplus_of_expression(x):
    return tf.nn.softplus(-2.0 * x) + tf.math.log_sigmoid(x + 1.0)


def power_and_roots(x):
    return tf.math.pow(x, 3) + tf.pow(x, -0.5) + tf.math.rsqrt(x) + tf.math.reciprocal(x)


def sign_at_zero(x):
    return tf.math.sign(x) * x + tf.math.sigmoid(x) + tf.math.tanh(x)


def negate_and_arithmetic(x, y):
    return tf.negative(x) + tf.multiply(x, y) + tf.add(x, 2.0) - tf.subtract(y, x)


def trigonometry(x):
    return tf.math.sin(x) * tf.math.cos(x) + tf.math.erf(x) + tf.floor(x) + tf.math.ceil(x)


def finite_nan_inf(x):
    clean = tf.where(tf.math.is_finite(x), x, tf.zeros_like(x))
    flags = tf.logical_or(tf.math.is_nan(x), tf.math.is_inf(x))
    return clean * 2.0, flags, tf.math.logical_xor(flags, x > 0), tf.logical_and(flags, x > 0)


def constructors(x):
    ones = tf.ones([2, 3])
    zeros = tf.zeros(tf.shape(x), dtype=tf.float64)
    full = tf.fill([2], 0.5)
    ints = tf.fill([3], 7)
    return x * tf.cast(ones, x.dtype) + zeros, full, ints, tf.ones(3, dtype=tf.int64)


def ranges(x):
    n = tf.shape(x)[0]
    return tf.range(n), tf.range(1, 7, 2), tf.range(n, dtype=tf.float64) * x


def one_hot_argmax(x):
    hot = tf.one_hot(tf.argmax(x, axis=1), 3)
    first = tf.argmax(x)  # axis 0, not the flattened argmax
    low = tf.math.argmin(x, axis=-1, output_type=tf.int32)
    return hot, first, low, tf.one_hot(tf.argmin(x, 1), x.shape[1], dtype=x.dtype) * x


def gather_tile(x):
    return tf.gather(x, [1, 1, 0]), tf.tile(x, [2, 1]), tf.gather(x, 0)


def any_all(x):
    return (
        tf.reduce_any(x > 1.0),
        tf.reduce_all(x > 0.0, axis=0),
        tf.math.reduce_any(x > 2.0, axis=1, keepdims=True),
    )


def norms(x):
    return (
        tf.norm(x),
        tf.norm(x, axis=1),
        tf.linalg.norm(x, axis=[0, 1], keepdims=True),
        tf.norm(x, axis=-1, keepdims=True),
    )


def l2_normalize_variants(x):
    return (
        tf.math.l2_normalize(x),
        tf.nn.l2_normalize(x, axis=1, epsilon=1e-3),
        tf.math.l2_normalize(x * 2.0, 0),
    )


def elu_selu_silu(x):
    return tf.nn.elu(x) + tf.nn.selu(x) + tf.nn.silu(x) + tf.nn.leaky_relu(x, 0.3)


def gelu_both(x):
    return tf.nn.gelu(x), tf.nn.gelu(x, approximate=True)


def size_rank(x):
    n = tf.cast(tf.size(x), x.dtype)
    return x / n, tf.rank(x), tf.size(x, out_type=tf.int64)


def reshape_like(x, y):
    return tf.reshape(y, tf.shape(x)) * x, tf.einsum("ij,ij->i", x, tf.reshape(y, [2, 2]))


def keepdims_expression(x):
    keep = True
    return tf.reduce_sum(x, axis=1, keepdims=keep), tf.reduce_max(x, keepdims=not keep)


def sigmoid_xent(logits, labels):
    return tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits * 2.0)


@tf.function
def compiled_then_eager(x):
    x = tf.convert_to_tensor(x, dtype=tf.float64)
    n = x.get_shape().as_list()[-1] + len(x.shape.as_list())
    return x * tf.cast(n, x.dtype), tf.convert_to_tensor([1, 2]), tf.function(tf.exp)(x)


def variance_std_moments(x):
    mean, var = tf.nn.moments(x, axes=[0])
    mean_k, var_k = tf.nn.moments(x, [0, 1], keepdims=True)
    return (
        tf.math.reduce_variance(x, axis=1),
        tf.math.reduce_std(x, axis=0, keepdims=True),
        tf.math.reduce_variance(x),
        mean * var,
        mean_k + var_k,
    )


def cumulative(x):
    return tf.math.cumsum(x, axis=1), tf.cumsum(x), tf.math.cumsum(x, axis=1, reverse=True)


def axis_names(x):
    outputs = []
    for axis in (0, -1, [0, 1], None, []):  # [] reduces nothing in TF
        outputs.append(tf.reduce_sum(x * 2.0, axis=axis))
        outputs.append(tf.reduce_max(x, axis=axis, keepdims=True))
    return outputs


def precedence(x):
    return 1.0 / tf.math.l2_normalize(x) + 2.0 * tf.clip_by_norm(x, 1.0) ** 2


def cast_python_numbers(x, n):
    scale = tf.cast(2**n - 1, x.dtype)
    return x * scale + tf.cast(0.1, tf.float64) + tf.cast(n > 1, x.dtype)


def unstacked(x):
    rows = tf.unstack(x)
    columns = tf.unstack(x, axis=1)
    return tf.stack([r * 2.0 for r in rows]), columns[0] * columns[-1]


def linear_algebra(a, b):
    inv = tf.linalg.inv(a)
    sol = tf.linalg.solve(a, b) + tf.linalg.solve(a, b, adjoint=True)
    diag = tf.linalg.diag(tf.linalg.diag_part(a)) + tf.eye(2, dtype=tf.float64)
    return inv, sol, tf.linalg.trace(a) * diag, tf.linalg.matrix_transpose(b), tf.eye(2, 3)


def more_math(x, y):
    a = tf.math.tan(x) + tf.math.atan(x) + tf.math.asin(x) + tf.math.acos(x)
    b = tf.math.sinh(x) * tf.math.cosh(x) + tf.math.lgamma(x + 2.0) + tf.math.digamma(x + 2.0)
    c = tf.math.atan2(y, x) + tf.nn.softsign(x) + tf.math.softsign(y)
    return a + b + c, tf.broadcast_to(x, [2, 3]), tf.broadcast_to(y, tf.shape(tf.ones([2, 3])))


def sums_and_products(x, y):
    return tf.add_n([x, y, x * y]), tf.scalar_mul(0.3, x), tf.tensordot(x, y, 1)


def padded(x):
    constant = tf.pad(x * 2.0, [[0, 1], [1, 1]], "CONSTANT", constant_values=-1.5)
    return tf.pad(x, [[1, 0], [0, 2]]), constant


def nn_helpers(x, b):
    table = tf.reshape(x, [3, 2])
    rows = tf.nn.embedding_lookup(table, [2, 0, 2])
    return tf.nn.l2_loss(x), tf.nn.bias_add(table, b), rows * 2.0


def sorted_with_ties(x):
    return tf.sort(x), tf.sort(x * 2.0, axis=0, direction="DESCENDING"), tf.sort(x, -1, "ASCENDING")


EXAMPLES = {
    "reduce_sum_all": ([[1.0, 2.0], [3.0, -4.0]],),
    "reduce_sum_axis_keepdims": ([[1.0, 2.0, 0.5], [3.0, -4.0, 1.0]],),
    "reduce_mean_axes": ([[[1.0, 2.0], [3.0, -4.0]], [[0.5, 0.25], [-1.0, 2.0]]],),
    "reduce_mean_keepdims_all": ([[1.0, 2.0], [3.0, -4.0]],),
    "reduce_max_ties": ([[1.0, 3.0, 3.0], [2.0, -1.0, 0.0]],),
    "reduce_min_all": ([[1.0, -3.0], [-3.0, 2.0]],),
    "reduce_prod_with_zero": ([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0], [0.5, -1.0, 2.0]],),
    "cast_roundtrip": ([0.1, 1.0 / 3.0, -2.5],),
    "where_three": ([1.0, 2.0, -1.0, 0.5], [0.5, 2.0, 1.0, -0.5]),
    "where_number": ([-1.0, 0.0, 2.0],),
    "clip_by_value_ties": ([-2.0, -1.0, 0.0, 1.0, 1.5],),
    "clip_by_norm_all": ([[3.0, 4.0], [0.0, 1.0]],),
    "clip_by_norm_small": ([[3.0, 4.0], [0.0, 1.0]],),
    "divide_no_nan_zero": ([1.0, 2.0, -3.0], [0.0, 4.0, 0.5]),
    "identity_and_stop": ([1.0, -2.0, 3.0],),
    "ones_and_zeros_like": ([1.0, -2.0],),
    "maximum_number": ([-1.0, 0.0, 2.0],),
    "maximum_number_first": ([-1.0, 0.0, 2.0],),
    "maximum_tensors": ([1.0, 2.0, -1.0], [1.0, 0.0, 3.0]),
    "minimum_number": ([-1.0, 0.5, 2.0],),
    "minimum_tensors": ([1.0, 2.0, -1.0], [1.0, 0.0, 3.0]),
    "activations": ([-2.0, 0.0, 0.5, 3.0],),
    "softplus_large": ([-50.0, 15.0, 21.0, 30.0, 40.0],),
    "sign_round_abs": ([-1.5, -0.5, 0.0, 0.5, 2.5, 3.7],),
    "exp_logs": ([0.5, 1.0, 2.0],),
    "sqrt_square": ([0.25, 1.0, 4.0],),
    "matmul_plain": ([[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0, 2.0], [1.0, 0.0, 1.0]]),
    "matmul_transposed": ([[1.0, 2.0], [3.0, 4.0]], [[0.5, -1.0], [2.0, 1.0], [0.0, 1.0]]),
    "reshape_transpose": ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],),
    "transpose_reverse": ([[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]],),
    "concat_stack": ([1.0, 2.0], [3.0, -4.0]),
    "expand_squeeze": ([1.0, -2.0, 3.0],),
    "shape_index": ([[1.0, 2.0, 3.0]],),
    "constants": ([1.0, 2.0],),
    "comparisons": ([1.0, 2.0, 3.0], [1.0, 0.0, 4.0]),
    "where_one_argument": ([[0.0, 1.0], [2.0, 0.25]],),
    "minimum_number_first": ([0.5, 1.0, 2.0],),
    "maximum_nan": ([float("nan"), 1.0, 2.0], [1.0, float("nan"), 2.0]),
    "constant_literals": ([1.0, -2.0],),
    "annotated": ([1.0, 2.0],),
    "softmax_default_axis": ([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]],),
    "logsumexp_all_and_axis": ([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]],),
    "logsumexp_minus_inf": ([[float("-inf"), 0.0, 1.0], [2.0, 2.0, -3.0]],),
    "softplus_of_expression": ([-30.0, -1.0, 0.0, 2.0, 25.0],),
    "power_and_roots": ([0.25, 1.0, 2.5],),
    "sign_at_zero": ([-2.0, 0.0, 0.5],),
    "negate_and_arithmetic": ([1.0, -2.0, 0.5], [0.5, 3.0, -1.0]),
    "trigonometry": ([-1.5, 0.0, 0.3, 2.0],),
    "finite_nan_inf": ([1.0, float("nan"), float("inf"), -2.0, float("-inf")],),
    "constructors": ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],),
    "ranges": ([0.5, -1.0, 2.0],),
    "one_hot_argmax": ([[1.0, 3.0, 3.0], [2.0, -1.0, 0.0], [0.0, 0.0, 0.0]],),
    "gather_tile": ([[1.0, 2.0], [3.0, 4.0]],),
    "any_all": ([[1.0, 2.5], [0.5, -1.0]],),
    "norms": ([[3.0, 4.0], [1.0, -2.0]],),
    "l2_normalize_variants": ([[3.0, 4.0], [0.01, -0.02]],),
    "elu_selu_silu": ([-3.0, -0.5, 0.0, 0.7, 6.0],),
    "gelu_both": ([-3.0, -0.5, 0.0, 0.7, 6.0],),
    "size_rank": ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],),
    "reshape_like": ([[1.0, 2.0], [3.0, 4.0]], [0.5, -1.0, 2.0, 0.25]),
    "keepdims_expression": ([[1.0, 2.0], [3.0, -4.0]],),
    "sigmoid_xent": ([-50.0, -1.0, 0.0, 0.0, 2.0, 40.0], [0.0, 0.25, 0.5, 1.0, 1.0, 0.3]),
    "compiled_then_eager": ([[1.0, 2.0, 3.0]],),
    "variance_std_moments": ([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]],),
    "cumulative": ([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]],),
    "axis_names": ([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]],),
    "precedence": ([3.0, -4.0],),
    "cast_python_numbers": ([1.0, -2.0], {"py": 3}),
    "unstacked": ([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]],),
    "linear_algebra": ([[2.0, 1.0], [0.5, 3.0]], [[1.0, -1.0, 0.5], [2.0, 0.0, 1.0]]),
    "more_math": ([-0.5, 0.0, 0.75], [1.0, -2.0, 0.0]),
    "sums_and_products": ([1.0, -2.0, 0.5], [0.25, 3.0, -1.0]),
    "padded": ([[1.0, 2.0], [3.0, -4.0]],),
    "nn_helpers": ([1.0, -2.0, 0.5, 3.0, 0.25, -1.0], [0.5, -0.25]),
    "sorted_with_ties": ([[3.0, 1.0, 3.0, -2.0], [1.0, 1.0, 0.5, 1.0]],),
}
