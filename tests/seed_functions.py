"""The seed documents' hand-written `torch.autograd.Function`s, kept as their authors wrote them.

The seed documents are four public tutorials on custom gradients in PyTorch that the project
started from. They are not part of the repository: this module keeps the code of theirs that the
tests use.

`tests/test_examples.py` checks each decorator-form example in `tf_compat_grad.examples` against
the class here that it replaces. The classes reproduce the seeds' behaviour exactly, quirks
included (CustomReLU and CustomSquaredLoss overwrite the upstream gradient with a constant,
SmoothRound's backward leaves out the 0.5 of the tanh's derivative); only comments and
formatting differ.

The seed documents, by number, and the classes taken from each:
    000 ("Does PyTorch offer a function analogous to TensorFlow's `tf.custom_gradient()`?"):
         CustomReLU, CustomSquaredLoss, MemoryEfficientSigmoid
    001 ("How can I define a custom gradient function in PyTorch?"): CustomExp, ConditionalOp,
         SmoothRound
    002 (an untitled walk-through of custom backward passes):
         MyReLU; it describes a stable log(sigmoid(x)) and a straight-through estimator in prose
         only, so LogSigmoid and StraightThroughRound are hand-written references for those
    003 (an untitled tutorial on `torch.autograd.Function` and `gradcheck`):
         ClippedReLUFunction and IncorrectClippedReLU (the backward that gradcheck must reject)
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd import Function

# --- 000 ----------------------------------------------------------------------------------


class CustomReLU(Function):
    @staticmethod
    def forward(ctx: Any, input_tensor: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input_tensor)
        return torch.clamp(input_tensor, min=0)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (input_tensor,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input_tensor <= 0] = -0.5  # the seed's "modified gradient for demonstration"
        return grad_input


class CustomSquaredLoss(Function):
    @staticmethod
    def forward(ctx: Any, prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = (prediction - target) ** 2
        ctx.save_for_backward(prediction, target)
        return loss

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        prediction, target = ctx.saved_tensors
        grad_loss_prediction = 2 * (prediction - target) * grad_output
        grad_loss_prediction[torch.abs(prediction - target) < 0.1] = 1.0
        return grad_loss_prediction, -2 * (prediction - target) * grad_output


class MemoryEfficientSigmoid(Function):
    @staticmethod
    def forward(ctx: Any, input_tensor: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input_tensor)
        output_tensor = torch.sigmoid(input_tensor)
        return output_tensor

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (input_tensor,) = ctx.saved_tensors
        output_tensor = torch.sigmoid(input_tensor)
        sigmoid_grad = output_tensor * (1 - output_tensor)
        grad_input = grad_output * sigmoid_grad
        return grad_input


# --- 001 ----------------------------------------------------------------------------------


class CustomExp(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.exp(x)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        grad_input = 2 * torch.exp(x) * grad_output  # deliberately 2*exp(x), not exp(x)
        return grad_input


class ConditionalOp(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        y = torch.zeros_like(x)
        y[x > 0] = x[x > 0] * 2
        y[x <= 0] = x[x <= 0] * 0.5
        return y

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        grad_input = torch.zeros_like(x)
        grad_input[x > 0] = grad_output[x > 0] * 2
        grad_input[x <= 0] = grad_output[x <= 0] * 0.5
        return grad_input


class SmoothRound(Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, alpha: float = 10.0) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.alpha = alpha
        return 0.5 + 0.5 * torch.tanh(alpha * (x - 0.5))

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        (x,) = ctx.saved_tensors
        alpha = ctx.alpha
        # As in the seed: the 0.5 of d/dx[0.5 * tanh] is missing, so this is twice the truth.
        return grad_output * alpha * (1 - torch.tanh(alpha * (x - 0.5)) ** 2), None


# --- 002 ----------------------------------------------------------------------------------


class MyReLU(Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        output = input.clamp_min(0)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (input,) = ctx.saved_tensors
        grad_input = grad_output.clone()
        grad_input[input < 0] = 0
        return grad_input


class LogSigmoid(Function):
    """Reference for 002's prose: a stable `log(sigmoid(x))` whose gradient is `sigmoid(-x)`.

    `log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))` never exponentiates a positive number, so
    it is finite for any finite x (the naive form gives -inf at x = -1000).
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return torch.clamp(x, max=0) - torch.log1p(torch.exp(-torch.abs(x)))

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad_output * torch.sigmoid(-x)


class StraightThroughRound(Function):
    """Reference for 002's prose: `round(x)` with the identity as its gradient."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return torch.round(x)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        return grad_output


# --- 003 ----------------------------------------------------------------------------------


class ClippedReLUFunction(Function):
    @staticmethod
    def forward(ctx: Any, input_tensor: torch.Tensor, clip_val: float) -> torch.Tensor:
        clip_val = float(clip_val)
        ctx.save_for_backward(input_tensor)
        ctx.clip_val = clip_val
        output = input_tensor.clamp(min=0, max=clip_val)
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        (input_tensor,) = ctx.saved_tensors
        clip_val = ctx.clip_val
        grad_input_mask = (input_tensor > 0) & (input_tensor < clip_val)
        grad_input = grad_output * grad_input_mask.float()
        return grad_input, None


class IncorrectClippedReLU(Function):
    @staticmethod
    def forward(ctx: Any, input_tensor: torch.Tensor, clip_val: float) -> torch.Tensor:
        ctx.save_for_backward(input_tensor)
        ctx.clip_val = float(clip_val)
        return input_tensor.clamp(min=0, max=ctx.clip_val)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad_input = grad_output.clone()  # wrong on purpose: the mask is forgotten
        return grad_input, None
