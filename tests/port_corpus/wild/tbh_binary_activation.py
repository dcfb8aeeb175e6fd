"""Twin-Bottleneck Hashing's stochastic binary activation: {0, 1} codes from a sigmoid compared
with uniform noise, returned with the probabilities; the gradient is the distributional
derivative through both outputs (a custom gradient with two outputs and two upstreams).

Source: ymcidence/TBH, layer/binary_activation.py (the `__main__` demo left out). No license file in the indexed copy. The noise
`eps` is an input, so the example is deterministic.
"""

import tensorflow as tf


def sigmoid_sign(logits, eps):
    """
    {0,1} sign function with (1) sigmoid activation (2) perturbation of eps in sigmoid
    :param logits: bottom layer output
    :param eps: randomly sampled values between [0,1]
    :return:
    """
    prob = 1.0 / (1 + tf.exp(-logits))
    code = (tf.sign(prob - eps) + 1.0) / 2.0
    return code, prob


@tf.custom_gradient
def binary_activation(logits, eps):
    code, prob = sigmoid_sign(logits, eps)

    def grad(_d_code, _d_prob):
        """
        Distributional derivative with Bernoulli probs
        :param _d_code: bp gradients through code
        :param _d_prob: bp gradients through prob
        :return:
        """

        d_logits = prob * (1 - prob) * (_d_code + _d_prob)

        d_eps = _d_code
        return d_logits, d_eps

    return [code, prob], grad


EXAMPLES = {"binary_activation": ([0.1, 0.2, -1.0, -0.7], [0.3, 0.9, 0.1, 0.5])}
