"""A gradient reversal Keras layer with `@tf.custom_gradient` on one of its methods (`self` bound,
the layer's `hp_lambda` read in the gradient function); `call` itself is the identity, and the
layer registers itself as serializable through `keras.src.saving`.

Source: Aiecco/MLHD25, src/Models/GradientReversal.py. No license file in the indexed copy.
"""

import tensorflow as tf
from keras.src.saving import register_keras_serializable
from tensorflow.keras.layers import Layer

@register_keras_serializable(package="Custom")
class GradientReversal(tf.keras.layers.Layer):
    def __init__(self, hp_lambda=1.0, **kwargs):
        super().__init__(**kwargs)
        self.hp_lambda = hp_lambda

    def call(self, x, training=None):
        # Forward pass: identità
        return x

    def get_config(self):
        config = super().get_config()
        config.update({'hp_lambda': self.hp_lambda})
        return config

    def compute_output_shape(self, input_shape):
        return input_shape

    # Sovrascrittura del comportamento del gradiente
    @tf.custom_gradient
    def grad_reverse(self, x):
        y = tf.identity(x)

        def custom_grad(dy):
            return -self.hp_lambda * dy

        return y, custom_grad


EXAMPLES = {
    "GradientReversal": {"init": [0.5], "method": "grad_reverse", "call": ([[1.0, -2.0], [0.5, 3.0]],)},
}
