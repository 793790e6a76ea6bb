"""Neural-network building blocks: ``Module`` and containers, ``Parameter``, ``init``,
``utils`` and ``functional``."""

# data parallelism without GPUs (docs/devices.md)
from ember.nn import (
    attention,  # noqa: F401
    functional,  # noqa: F401
    init,  # noqa: F401, E402
    parallel,  # noqa: E402, F401
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
from ember.nn.modules.activation import (  # noqa: F401
    CELU,
    ELU,
    GELU,
    GLU,
    SELU,
    Hardshrink,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softmax2d,
    Softmin,
    Softplus,
    Softshrink,
    Softsign,
    Tanh,
    Tanhshrink,
    Threshold,
)
from ember.nn.modules.activation_attention import MultiheadAttention  # noqa: F401
from ember.nn.modules.batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d  # noqa: F401
from ember.nn.modules.conv import (  # noqa: F401
    Conv1d,
    Conv2d,
    ConvTranspose1d,
    ConvTranspose2d,
)
from ember.nn.modules.dropout import (  # noqa: F401
    AlphaDropout,
    Dropout,
    Dropout1d,
    Dropout2d,
    Dropout3d,
    FeatureAlphaDropout,
)
from ember.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from ember.nn.modules.instancenorm import (  # noqa: F401
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
)
from ember.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from ember.nn.modules.loss import (  # noqa: F401
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HingeEmbeddingLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    SoftMarginLoss,
)
from ember.nn.modules.normalization import GroupNorm, LayerNorm, RMSNorm  # noqa: F401
from ember.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool1d,
    AdaptiveAvgPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from ember.nn.modules.rnn import (  # noqa: F401
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNBase,
    RNNCell,
    RNNCellBase,
)
from ember.nn.modules.sparse import Embedding  # noqa: F401
from ember.nn.modules.transformer import (  # noqa: F401
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from ember.nn.parallel import DataParallel  # noqa: E402, F401
from ember.nn.parameter import Parameter  # noqa: F401

# isort: split
# image layers: padding, pixel shuffle, upsampling, fold (issue 13)
from ember.nn.modules.fold import Fold, Unfold  # noqa: F401, E402
from ember.nn.modules.padding import (  # noqa: F401, E402
    CircularPad1d,
    CircularPad2d,
    CircularPad3d,
    ConstantPad1d,
    ConstantPad2d,
    ConstantPad3d,
    ReflectionPad1d,
    ReflectionPad2d,
    ReflectionPad3d,
    ReplicationPad1d,
    ReplicationPad2d,
    ReplicationPad3d,
    ZeroPad1d,
    ZeroPad2d,
    ZeroPad3d,
)
from ember.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle  # noqa: F401, E402
from ember.nn.modules.upsampling import (  # noqa: F401, E402
    Upsample,
    UpsamplingBilinear2d,
    UpsamplingNearest2d,
)

