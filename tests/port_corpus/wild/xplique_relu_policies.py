"""Xplique's ReLU policies for attribution methods: guided backpropagation and DeconvNet, custom
gradients closed over a Keras `ReLU` layer (with its max_value and threshold) whose backward
passes only positive gradients (float32 masks, so float32 inputs and Keras computing in float32).

Source: deel-ai/xplique, xplique/commons/model_override.py (MIT); the model cloning helpers left
out, `..types` imports taken from `typing`.
"""

import tensorflow as tf

from typing import Tuple, Callable, Optional


def guided_relu_policy(max_value: Optional[float] = None, threshold: float = 0.0) -> Callable:
    """
    Generate a guided relu activation function.
    Some models have relu with different threshold and plateau settings than a classic relu,
    it is important to preserve these settings when changing activations so that the forward
    remains intact.
    """
    relu = tf.keras.layers.ReLU(max_value=max_value, threshold=threshold)

    @tf.custom_gradient
    def guided_relu(inputs: tf.Tensor) -> Tuple[tf.Tensor, Callable]:
        """
        Guided relu activation function.
        Act like a relu during forward pass, but allows only positive gradients with positive
        activation to pass through during backprop.
        """

        def grad_func(grads):
            gate_activation = tf.cast(inputs > 0.0, tf.float32)
            return tf.nn.relu(grads) * gate_activation

        return relu(inputs), grad_func

    return guided_relu


def deconv_relu_policy(max_value: Optional[float] = None, threshold: float = 0.0) -> Callable:
    """
    Generate a deconv relu activation function.
    """
    relu = tf.keras.layers.ReLU(max_value=max_value, threshold=threshold)

    @tf.custom_gradient
    def deconv_relu(inputs: tf.Tensor) -> Tuple[tf.Tensor, Callable]:
        """
        DeconvNet activation function.
        Act like a relu during forward pass, but allows only positive gradients to pass through
        during backprop.
        """

        def grad_func(grads):
            return tf.nn.relu(grads)

        return relu(inputs), grad_func

    return deconv_relu


def guided(x):
    return guided_relu_policy()(x)


def deconv_relu6(x):
    return deconv_relu_policy(max_value=6.0, threshold=0.5)(x)


KERAS_FLOATX = "float32"


def f32(values):
    return {"tensor": values, "dtype": "float32"}


EXAMPLES = {
    "guided": (f32([-1.5, -0.2, 0.3, 2.0, 7.0]),),
    "deconv_relu6": (f32([-1.5, 0.2, 0.7, 2.0, 7.0]),),
}
