"""A Keras layer as real code writes one: `activations.get`, `initializers.get`,
`regularizers.get` and `constraints.get` in `__init__`, an `InputSpec`, `build` with
`tf.compat.dimension_value` and `add_weight` with a regularizer and a constraint, a straight-through sign as a static custom gradient, `serialize` in `get_config`;
called, with its regularization loss."""

import tensorflow as tf
from tensorflow import keras
from tensorflow.keras import activations, constraints, initializers, layers, regularizers


@keras.utils.register_keras_serializable(package="custom")
class SignDense(layers.Layer):
    def __init__(
        self,
        units,
        activation=None,
        kernel_initializer="glorot_uniform",
        kernel_regularizer=None,
        kernel_constraint=None,
        use_bias=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = units
        self.activation = activations.get(activation)
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.use_bias = use_bias
        self.input_spec = layers.InputSpec(min_ndim=2)

    def build(self, input_shape):
        last_dim = tf.compat.dimension_value(input_shape[-1])
        self.kernel = self.add_weight(
            name="kernel",
            shape=[last_dim, self.units],
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
            dtype=self.dtype,
        )
        self.bias = self.add_weight(
            name="bias", shape=[self.units], initializer="ones", dtype=self.dtype
        )

    def call(self, inputs):
        kernel = tf.convert_to_tensor(self.kernel)
        outputs = tf.matmul(inputs, self._sign(kernel) * tf.abs(kernel))
        return self.activation(tf.nn.bias_add(outputs, self.bias))

    @staticmethod
    @tf.custom_gradient
    def _sign(w):
        def grad(dy):
            return tf.clip_by_value(dy, -1.0, 1.0)

        return tf.sign(w), grad

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "activation": activations.serialize(self.activation),
                "kernel_initializer": initializers.serialize(self.kernel_initializer),
            }
        )
        return config


def sign_dense(x):
    layer = SignDense(
        2,
        activation="tanh",
        kernel_initializer=tf.keras.initializers.Constant([[0.5, -1.0], [2.0, 0.25], [-0.75, 1.5]]),
        kernel_regularizer=regularizers.L2(0.1),
        kernel_constraint=lambda w: tf.maximum(w, 0.0),
        dtype="float64",
    )
    y = layer(x)
    return y, tf.add_n(layer.losses)


EXAMPLES = {"sign_dense": ([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]],)}
