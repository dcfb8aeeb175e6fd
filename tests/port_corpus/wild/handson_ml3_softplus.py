"""The stable softplus of "Hands-On Machine Learning" (3rd edition): softplus(-|z|) + max(0, z)
forward, and the gradient 1 - 1 / (1 + exp(z)), which stays finite for large z.

Source: ageron/handson-ml3, 12_custom_models_and_training_with_tensorflow.ipynb (Apache-2.0).
"""

import tensorflow as tf


@tf.custom_gradient
def my_softplus(z):
    def my_softplus_gradients(grads):  # grads = backprop'ed from upper layers
        return grads * (1 - 1 / (1 + tf.exp(z)))  # stable grads of softplus

    result = tf.math.log(1 + tf.exp(-tf.abs(z))) + tf.maximum(0.0, z)
    return result, my_softplus_gradients


EXAMPLES = {"my_softplus": ([-30.0, -1.0, 0.0, 2.0, 1000.0],)}
