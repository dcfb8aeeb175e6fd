"""TensorFlow Probability's von Mises CDF: a series expansion (a `tf.while_loop` carrying the
derivative w.r.t. the concentration forward) or a Normal approximation (differentiated with a
tape in the forward pass), with a custom gradient that returns the density for `x` and the
carried derivative for the concentration.

Source: tensorflow/probability, tensorflow_probability/python/distributions/von_mises.py
(Apache-2.0): `von_mises_cdf`, `_von_mises_cdf_series`, `_von_mises_cdf_normal`. TFP's own
helpers are replaced by their meaning so the file runs with TensorFlow alone:
`value_and_gradient` (tfp.math) by a GradientTape, `normal.Normal(0, 1).cdf` by erfc.
"""

import numpy as np
import tensorflow as tf


def value_and_gradient(f, x):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = f(x)
    return y, tape.gradient(y, x)


def standard_normal_cdf(x):
    return 0.5 * tf.math.erfc(-x / np.sqrt(2.0))


@tf.custom_gradient
def von_mises_cdf(x, concentration):
    """Computes the cumulative density function (CDF) of von Mises distribution."""
    x = tf.convert_to_tensor(x)
    concentration = tf.convert_to_tensor(concentration)
    dtype = x.dtype

    # Map x to [-pi, pi].
    num_periods = tf.round(x / (2.0 * np.pi))
    x = x - (2.0 * np.pi) * num_periods

    # We take the hyperparameters from Table I of [1], the row for D=8
    # decimal digits of accuracy. ck is the cut-off for concentration:
    # if concentration < ck,  the series expansion is used;
    # otherwise, the Normal approximation is used.
    ck = 10.5
    # The number of terms in the series expansion. [1] chooses it as a function
    # of concentration, n(concentration). This is hard to implement in TF.
    # Instead, we upper bound it over concentrations:
    #   num_terms = ceil ( max_{concentration <= ck} n(concentration) ).
    # The maximum is achieved for concentration = ck.
    num_terms = 20

    cdf_series, dcdf_dconcentration_series = _von_mises_cdf_series(
        x, concentration, num_terms, dtype
    )
    cdf_normal, dcdf_dconcentration_normal = _von_mises_cdf_normal(x, concentration, dtype)

    use_series = concentration < ck
    cdf = tf.where(use_series, cdf_series, cdf_normal)
    cdf = cdf + num_periods
    dcdf_dconcentration = tf.where(
        use_series, dcdf_dconcentration_series, dcdf_dconcentration_normal
    )

    def grad(dy):
        prob = tf.exp(concentration * (tf.cos(x) - 1.0)) / (
            (2.0 * np.pi) * tf.math.bessel_i0e(concentration)
        )
        return dy * prob, dy * dcdf_dconcentration

    return cdf, grad


def _von_mises_cdf_series(x, concentration, num_terms, dtype):
    """Computes the von Mises CDF and its derivative via series expansion."""
    # Keep the number of terms as a float. It should be a small integer, so
    # exactly representable as a float.
    num_terms = tf.cast(num_terms, dtype=dtype)

    def loop_body(n, rn, drn_dconcentration, vn, dvn_dconcentration):
        """One iteration of the series loop."""

        denominator = 2.0 * n / concentration + rn
        ddenominator_dk = -2.0 * n / concentration**2 + drn_dconcentration
        rn = 1.0 / denominator
        drn_dconcentration = -ddenominator_dk / denominator**2

        multiplier = tf.sin(n * x) / n + vn
        vn = rn * multiplier
        dvn_dconcentration = drn_dconcentration * multiplier + rn * dvn_dconcentration
        n = n - 1.0

        return n, rn, drn_dconcentration, vn, dvn_dconcentration

    (_, _, _, vn, dvn_dconcentration) = tf.while_loop(
        cond=lambda n, *_: n > 0.0,
        body=loop_body,
        loop_vars=(
            num_terms,  # n
            tf.zeros_like(x, name="rn"),
            tf.zeros_like(x, name="drn_dconcentration"),
            tf.zeros_like(x, name="vn"),
            tf.zeros_like(x, name="dvn_dconcentration"),
        ),
    )

    cdf = 0.5 + x / (2.0 * np.pi) + vn / np.pi
    dcdf_dconcentration = dvn_dconcentration / np.pi

    # Clip the result to [0, 1].
    cdf_clipped = tf.clip_by_value(cdf, 0.0, 1.0)
    # The clipped values do not depend on concentration anymore, so set their
    # derivative to zero.
    dcdf_dconcentration = dcdf_dconcentration * tf.cast((cdf >= 0.0) & (cdf <= 1.0), dtype)

    return cdf_clipped, dcdf_dconcentration


def _von_mises_cdf_normal(x, concentration, dtype):
    """Computes the von Mises CDF and its derivative via Normal approximation."""

    def cdf_func(concentration):
        """A helper function that is passed to value_and_gradient."""
        # z is an "almost Normally distributed" random variable.
        z = (
            tf.constant(np.sqrt(2.0 / np.pi), dtype=dtype) / tf.math.bessel_i0e(concentration)
        ) * tf.sin(0.5 * x)

        # This is the correction described in [1] which reduces the error
        # of the Normal approximation.
        z2 = z**2
        z3 = z2 * z
        z4 = z2**2
        c = 24.0 * concentration
        c1 = 56.0

        xi = z - z3 / ((c - 2.0 * z2 - 16.0) / 3.0 - (z4 + (7.0 / 4.0) * z2 + 167.0 / 2.0) / (c - c1 - z2 + 3.0)) ** 2

        return standard_normal_cdf(xi)

    return value_and_gradient(cdf_func, concentration)


EXAMPLES = {
    "von_mises_cdf": ([-4.0, -1.0, 0.5, 2.0, 7.0], [0.5, 2.0, 12.0, 5.0, 20.0]),
}
