"""Neural-network building blocks: ``Module`` and containers, ``Parameter``, ``init``,
``utils`` and ``functional``."""

from ember.nn import (
    functional,  # noqa: F401
    init,  # noqa: F401, E402
    utils,  # noqa: F401, E402
)
from ember.nn.modules import (  # noqa: F401
    Module,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from ember.nn.parameter import Parameter  # noqa: F401
