"""TensorFlow's own `tf.nn.silu` (swish): the activation and the gradient for `beta` in a custom
gradient written against TensorFlow's internal modules (`ops`, `math_ops`, `custom_gradient`),
sigmoid recomputed under a control dependency on the upstream gradient.

Source: tensorflow/tensorflow, tensorflow/python/ops/nn_impl.py (Apache-2.0); the export and
dispatch decorators left out.
"""

from tensorflow.python.framework import ops
from tensorflow.python.ops import custom_gradient
from tensorflow.python.ops import math_ops


def swish(features, beta=1.0):
    features = ops.convert_to_tensor(features, name="features")
    beta = ops.convert_to_tensor(beta, name="beta")
    beta = math_ops.cast(beta, features.dtype)

    @custom_gradient.custom_gradient
    def swish_impl(features, beta):
        def grad(dy):
            """Gradient for the Swish activation function."""
            # Naively, x * tf.nn.sigmoid(x) requires keeping both x and sigmoid(x)
            # around for backprop, effectively doubling the tensor's memory
            # consumption. We use a control dependency here so that sigmoid(features)
            # is re-computed during backprop (the control dep prevents it being
            # de-duped with the forward pass) and we can free the sigmoid(features)
            # expression immediately after use during the forward pass.
            with ops.control_dependencies([dy]):
                sigmoid_features = math_ops.sigmoid(beta * features)
            activation_grad = sigmoid_features * (
                1.0 + (beta * features) * (1.0 - sigmoid_features)
            )
            beta_grad = math_ops.reduce_sum(
                dy * math_ops.square(features) * sigmoid_features * (1.0 - sigmoid_features)
            )
            return (dy * activation_grad, beta_grad)

        return features * math_ops.sigmoid(beta * features), grad

    return swish_impl(features, beta)


EXAMPLES = {
    "swish": ([-3.0, -0.5, 0.0, 0.7, 4.0], [1.5]),
}
