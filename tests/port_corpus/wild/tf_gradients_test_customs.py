"""TensorFlow's own tests of `custom_gradient`: an identity whose gradient triples (used twice),
a product whose gradient swaps its factors, and the decorator on a method of a plain class.

Source: tensorflow/tensorflow, tensorflow/python/ops/gradients_test.py (Apache-2.0): the
functions of testCustomGradientTrivial, testCustomGradient and testCustomGradientClass, out of
their test methods and graphs.
"""

from tensorflow.python.ops import custom_gradient


@custom_gradient.custom_gradient
def MyIdentity(x):
    def Grad(dy):
        return [3 * dy]

    return x, Grad


@custom_gradient.custom_gradient
def MyMultiply(x1, x2):
    result = x1 * x2

    def Grad(dy):
        # Switched the ordering here.
        return [dy * x1, dy * x2]

    return result, Grad


class Model(object):
    @custom_gradient.custom_gradient
    def Multiply(self, x1, x2):
        result = x1 * x2
        grad = lambda dy: (dy * x1, dy * x2)
        return result, grad


def identity_twice(x):
    return MyIdentity(MyIdentity(x))


def model_multiply(x1, x2):
    m = Model()
    return m.Multiply(x1, x2)


EXAMPLES = {
    "identity_twice": ([3.0, -1.0],),
    "MyMultiply": ([3.0, 1.5], [5.0, -2.0]),
    "model_multiply": ([3.0, 1.5], [5.0, -2.0]),
}
