"""Memory-efficient Swish and Mish with hand-written gradients (EfficientNet style)."""

from tensorflow import custom_gradient, math, nn


@custom_gradient
def swish(x):
    sig = nn.sigmoid(x)

    def grad(dy):
        return dy * (sig * (1 + x * (1 - sig)))

    return x * sig, grad


@custom_gradient
def mish(x):
    sp = math.softplus(x)
    tsp = math.tanh(sp)

    def grad(dy):
        sig = math.sigmoid(x)
        return dy * (tsp + x * sig * (1 - math.square(tsp)))

    return x * tsp, grad


EXAMPLES = {
    "swish": ([-3.0, -0.5, 0.0, 0.5, 4.0],),
    "mish": ([-3.0, -0.5, 0.0, 0.5, 4.0],),
}
