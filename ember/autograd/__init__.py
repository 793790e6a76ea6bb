"""Automatic differentiation: the graph, the engine, grad modes, Function, gradcheck."""

from ember.autograd.engine import backward, grad  # noqa: F401
from ember.autograd.function import Function, FunctionCtx, once_differentiable  # noqa: F401,E402
from ember.autograd.grad_mode import (  # noqa: F401
    enable_grad,
    inference_mode,
    no_grad,
    set_grad_enabled,
)
from ember.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401,E402
from ember.autograd.graph import Node  # noqa: F401
