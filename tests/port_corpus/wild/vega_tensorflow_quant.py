"""Vega's quantizers for weights and activations, written against `tensorflow.compat.v1`:
straight-through sign, XNOR-Net's sign scaled by the mean magnitude over a kernel's spatial and
input axes, DoReFa/WRPN quantisation with a Python bit width (`None` as its gradient), and
Bi-Real Net's piecewise-polynomial activation gradient.

Source: huawei-noah/vega, vega/modules/operators/quant/tensorflow_quant.py (Apache-2.0, Huawei):
the quantization functions; the `QuantConv` module (built on Vega's `Module` and
`tf.get_variable`), `bireal_w` (a `tf.Variable` created per call) and `pact_a` (which calls
`quantize_a` with three arguments where it takes two) left out.
"""

import tensorflow.compat.v1 as tf


@tf.custom_gradient
def sign(input):
    """Apply Sign class in dorefa-net for weights.

    :param input: batch of input
    :type input: Tensor
    :return: quantized output
    :rtype: Tensor
    """
    input = tf.math.sign(input)

    def grads(grad_output):
        return grad_output

    return input, grads


@tf.custom_gradient
def xnor(input):
    """Apply Sign class in dorefa-net for weights.

    :param input: batch of input
    :type input: Tensor
    :return: quantized output
    :rtype: Tensor
    """
    input = tf.math.sign(input) * tf.reduce_mean(tf.math.abs(input), axis=[1, 2, 3], keepdims=True)

    def grads(grad_output):
        return grad_output

    return input, grads


@tf.custom_gradient
def scale_sign(input):
    """Apply Sign class in dorefa-net for weights.

    :param input: batch of input
    :type input: Tensor
    :return: quantized output
    :rtype: Tensor
    """
    input = tf.math.sign(input) * tf.reduce_mean(tf.math.abs(input))

    def grads(grad_output):
        return grad_output

    return input, grads


def dorefa_w(w, nbit_w, *args, **kwargs):
    """Dorefa quantization for weights.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :param alpha: scale factor
    :type alpha: float or Tensor
    :param offset: offset factor
    :type offset: float or Tensor
    :return: quantized output
    :rtype: Tensor
    """
    if nbit_w == 1:
        w = scale_sign(w)
    else:
        w = tf.math.tanh(w)
        w = w / (2 * tf.reduce_max(tf.math.abs(w))) + 0.5
        w = 2 * quantize_w(w, nbit_w) - 1
    return w


@tf.custom_gradient
def quantize_w(input, nbit):
    """Quantization function for weights.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :return: quantized output and grad function
    :rtype: Tensor, fn
    """
    scale = tf.cast((2 ** nbit - 1), input.dtype)
    output = tf.math.round(input * scale) / scale

    def grads(grad_output):
        if grad_output is None:
            return tf.zeros_like(input), None
        return grad_output, None

    return output, grads


def wrpn_w(w, nbit_w, *args, **kwargs):
    """Wrpn quantization for weights.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :param alpha: scale factor
    :type alpha: float or Tensor
    :param offset: offset factor
    :type offset: float or Tensor
    :return: quantized output
    :rtype: Tensor
    """
    if nbit_w == 1:
        w = scale_sign(w)
    else:
        w = quantize_w(tf.clip_by_value(w, -1, 1), nbit_w - 1)
    return w


def xnor_w(w, nbit_w=1, *args, **kwargs):
    """Xnor quantization for weights.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :param alpha: scale factor
    :type alpha: float or Tensor
    :param offset: offset factor
    :type offset: float or Tensor
    :return: quantized output
    :rtype: Tensor
    """
    if nbit_w != 1:
        raise ValueError('nbit_w must be 1 in XNOR-Net.')
    return xnor(w)


def dorefa_a(input, nbit_a, *args, **kwargs):
    """Dorefa quantization for activations.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :return: quantized output
    :rtype: Tensor
    """
    return quantize_a(tf.clip_by_value(input, 0, 1.0), nbit_a)


@tf.custom_gradient
def quantize_a(input, nbit):
    """Quantization function for activations.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :return: quantized output and grad function
    :rtype: Tensor, fn
    """
    scale = tf.cast((2 ** nbit - 1), input.dtype)
    output = tf.math.round(input * scale) / scale

    def grads(grad_output):
        if grad_output is None:
            return tf.zeros_like(input), None
        return grad_output, None

    return output, grads


@tf.custom_gradient
def bireal_a_calc(input):
    """Forward and backward for bireal_a.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :param alpha: scale factor
    :type alpha: float or Tensor
    :param offset: offset factor
    :type offset: float or Tensor
    :return: quantized output
    :rtype: Tensor
    """
    input = tf.math.sign(tf.clip_by_value(input, -1, 1))

    def grads(grad_output):
        grad_input = (2 + 2 * input) * tf.cast(tf.math.less(input, 0), dtype=input.dtype) + \
                     (2 - 2 * input) * tf.cast(tf.math.greater_equal(input, 0), dtype=input.dtype)
        grad_input = tf.minimum(grad_input, 0)
        grad_input *= grad_output
        return grad_input

    return input, grads


def bireal_a(input, nbit_a=1, *args, **kwargs):
    """Adaptor for bireal_a.

    :param input: batch of input
    :type input: Tensor
    :param nbit: bit width
    :type nbit: int
    :param alpha: scale factor
    :type alpha: float or Tensor
    :param offset: offset factor
    :type offset: float or Tensor
    :return: quantized output
    :rtype: Tensor
    """
    return bireal_a_calc(input)


KERNEL = [[[[0.5, -1.0], [2.0, -0.25]], [[-0.75, 1.5], [0.3, -2.0]]],
          [[[1.25, 0.1], [-0.6, 0.9]], [[-1.1, -0.4], [0.8, 2.5]]]]

EXAMPLES = {
    "sign": ([-1.5, -0.2, 0.3, 2.0],),
    "xnor_w": (KERNEL,),
    "dorefa_w": ([[-1.5, -0.2], [0.3, 2.0]], {"py": 2}),
    "scale_sign": ([[-1.5, -0.2], [0.3, 2.0]],),
    "wrpn_w": ([[-1.5, -0.2], [0.3, 0.9]], {"py": 3}),
    "dorefa_a": ([-0.5, 0.1, 0.45, 0.8, 1.7], {"py": 2}),
    "bireal_a": ([-1.5, -0.2, 0.3, 2.0],),
}
