"""``ember.ao.quantization``: int8 dynamic quantization with PyTorch's API (see
docs/low_precision.md)."""

from ember.ao.quantization.observer import (  # noqa: F401
    MinMaxObserver,
    PerChannelMinMaxObserver,
    PlaceholderObserver,
    QConfig,
    default_dynamic_qconfig,
    default_dynamic_quant_observer,
    default_per_channel_weight_observer,
    default_weight_observer,
    float16_dynamic_qconfig,
    per_channel_dynamic_qconfig,
    per_token_dynamic_qconfig,
    per_token_dynamic_quant_observer,
)
from ember.ao.quantization.qtensor import (  # noqa: F401
    QuantizedTensor,
    dequantize,
    quantize_per_channel,
    quantize_per_tensor,
)
from ember.ao.quantization.quantize import (  # noqa: F401
    get_default_dynamic_quant_module_mappings,
    quantize_dynamic,
)
