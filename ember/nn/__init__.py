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
from ember.nn.modules.activation import (  # noqa: F401
    CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,
    LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, SiLU, Sigmoid, Softmax, Softmax2d,
    Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold,
)
from ember.nn.modules.dropout import (  # noqa: F401
    AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout,
)
from ember.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from ember.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from ember.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, HingeEmbeddingLoss,
    HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, NLLLoss, SmoothL1Loss,
    SoftMarginLoss,
)
from ember.nn.modules.sparse import Embedding  # noqa: F401
