"""An identity whose gradient is clipped by norm, with the norm a second argument that gets no
gradient (`tf.clip_by_norm` inside grad_fn, a list of gradients returned).

Source: MasatoMiyoshi/tensorflow_tutorial, high_level_api/auto_diff_custom.py (its TF1 eager
preamble, `tf.contrib.eager`, left out). No license file in the indexed copy.
"""

import tensorflow as tf


@tf.custom_gradient
def clip_gradient_by_norm(x, norm):
    y = tf.identity(x)

    def grad_fn(dresult):
        return [tf.clip_by_norm(dresult, norm), None]

    return y, grad_fn


EXAMPLES = {"clip_gradient_by_norm": ([[0.5, -1.0, 2.0], [1.5, 0.0, -0.25]], {"py": 0.5})}
