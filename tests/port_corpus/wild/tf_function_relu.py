"""A custom gradient defined inside a `tf.function`: relu of a stopped input with a zero
gradient function.

Source: cloudhan/tf-distribute-explore, 3_new_op/show_custom_gradient.py. No license file in the indexed copy.
"""

import tensorflow as tf


@tf.function
def my_relu(x):
    @tf.custom_gradient
    def forward(x):
        def grad_fn(grad):
            # return tf.ones_like(x) # <-- uncomment this line to change the grad to ones
            return tf.zeros_like(x)

        return tf.nn.relu(tf.stop_gradient(x)), grad_fn

    return forward(x)


EXAMPLES = {"my_relu": ([-1.0, 0.0, 1.0, 2.0, 3.0],)}
