"""``ember.nn`` module classes."""

from ember.nn.modules.container import (  # noqa: F401
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from ember.nn.modules.module import Module  # noqa: F401
