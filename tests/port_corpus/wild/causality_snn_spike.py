"""The LSNN spike function of e-prop: a Heaviside in float32 with a triangular pseudo-derivative
scaled by a dampening factor, used twice in a leaky integrate-and-fire step.

Source: s-abeera/causality-in-SNNs, utils.py. No license file in the indexed copy. Recorded in float32 (the function casts its spikes
to float32, so float64 inputs would not run in TensorFlow either).
"""

import tensorflow as tf


@tf.custom_gradient
def spike_function(v_scaled, dampening_factor):
    z_ = tf.greater(v_scaled, 0.0)
    z_ = tf.cast(z_, dtype=tf.float32)

    def grad(dy):
        dE_dz = dy
        dz_dv_scaled = tf.maximum(1 - tf.abs(v_scaled), 0)
        dz_dv_scaled *= dampening_factor

        dE_dv_scaled = dE_dz * dz_dv_scaled

        return [dE_dv_scaled, tf.zeros_like(dampening_factor)]

    return tf.identity(z_, name="spike_function"), grad


def lif_dynamic(v, i, decay, v_th, dampening_factor=0.3):
    old_z = spike_function((v - v_th) / v_th, dampening_factor)
    new_v = decay * v + i - old_z * v_th
    new_z = spike_function((new_v - v_th) / v_th, dampening_factor)
    return new_v, new_z


def f32(values):
    return {"tensor": values, "dtype": "float32"}


EXAMPLES = {
    "spike_function": (f32([-1.5, -0.5, 0.25, 0.75, 2.0]), f32(0.3)),
    "lif_dynamic": (
        f32([0.2, 0.9, 1.4, 2.5]),
        f32([0.5, 0.3, -0.2, 0.1]),
        f32(0.9),
        f32(1.0),
        f32(0.3),
    ),
}
