"""tf-keras-vis's guided backpropagation: a model modifier whose method wraps any activation
(`tf.keras.activations.relu` by default, a Keras function used as a value) in a custom gradient
that passes only positive gradients where the input was positive (masks cast to dy's dtype).

Source: keisen/tf-keras-vis, tf_keras_vis/utils/model_modifiers.py (MIT); the other modifiers
left out, `ModelModifier` reduced to its abstract `__call__`.
"""

from abc import ABC, abstractmethod

import tensorflow as tf


class ModelModifier(ABC):
    """Abstract class for defining a model modifier."""

    @abstractmethod
    def __call__(self, model) -> None:
        raise NotImplementedError()


class GuidedBackpropagation(ModelModifier):
    """A model modifier that replaces the gradient calculation of activation functions to
    Guided calculation.
    """

    def __init__(self, target_activations=[tf.keras.activations.relu]) -> None:
        self.target_activations = target_activations

    def _get_guided_activation(self, activation):
        @tf.custom_gradient
        def guided_activation(x):
            def grad(dy):
                return tf.cast(dy > 0, dy.dtype) * tf.cast(x > 0, dy.dtype) * dy

            return activation(x), grad

        return guided_activation

    def __call__(self, model) -> None:
        for layer in (layer for layer in model.layers if hasattr(layer, "activation")):
            if layer.activation in self.target_activations:
                layer.activation = self._get_guided_activation(layer.activation)


def guided_relu(x):
    modifier = GuidedBackpropagation()
    return modifier._get_guided_activation(modifier.target_activations[0])(x)


EXAMPLES = {"guided_relu": ([-1.5, -0.2, 0.3, 2.0],)}
