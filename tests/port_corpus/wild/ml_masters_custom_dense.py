"""A Keras layer whose `build` creates its weights with `add_weight` (shapes read from the input
shape) and whose `call` hands them, with the input, to a module-level custom gradient that writes
out the dense layer's three gradients by hand.

Source: rashaad-meyer/ml_masters_uct, Deconvolution/LayerTests/CustomGradientTest.py (the
`__main__` training demo and the unused `numpy` import left out). No license file in the indexed
copy. The layer is kept but not exercised: TF 2.21 refuses its call ("grad_fn must accept
keyword argument 'variables', since function uses variables"), as the weights reach the custom
gradient as arguments and are read as variables.
"""

import tensorflow as tf
from keras import layers


@tf.custom_gradient
def custom_operation(w, b, x):
    y = tf.matmul(x, w) + b

    def grad_fn(dldz):
        wt = tf.transpose(w)
        xt = tf.transpose(x)

        dldw = tf.matmul(xt, dldz)
        dldx = tf.matmul(dldz, wt)

        dldb = tf.reduce_sum(dldz, axis=0)

        return dldw, dldb, dldx

    return y, grad_fn


# end def custom_op


class CustomLayer(tf.keras.layers.Layer):
    def __init__(self, hidden_size):
        super(CustomLayer, self).__init__()
        self.w = None
        self.b = None
        self.hidden_size = hidden_size

    def build(self, input_shape):
        self.w = self.add_weight(
            name='w',
            shape=(input_shape[1], self.hidden_size),
            initializer='random_normal',
            trainable=True
        )
        self.b = self.add_weight(
            name='b',
            shape=(self.hidden_size,),
            initializer='random_normal',
            trainable=True
        )

    def call(self, x):
        return custom_operation(self.w, self.b, x)


EXAMPLES = {
    "custom_operation": (
        [[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]],
        [0.1, -0.2, 0.3],
        [[1.0, 2.0], [-0.5, 0.75]],
    ),
}
