"""TensorFlow's guide on custom gradients in a SavedModel: an identity whose gradient is clipped
to norm 0.5, called from a `tf.function` method with an input signature on a `tf.Module`.

Source: tensorflow/docs, site/en/guide/advanced_autodiff.ipynb (Apache-2.0), the cells defining
`clip_gradients` and `MyModule` (saving and loading left out).
"""

import tensorflow as tf


# Establish an identity operation, but clip during the gradient pass.
@tf.custom_gradient
def clip_gradients(y):
    def backward(dy):
        return tf.clip_by_norm(dy, 0.5)

    return y, backward


class MyModule(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec(None)])
    def call_custom_grad(self, x):
        return clip_gradients(x)


EXAMPLES = {
    "MyModule": {
        "method": "call_custom_grad",
        "call": ({"tensor": [2.0, -1.0, 0.5], "dtype": "float32"},),
    }
}
