"""``ember.quantization``: PyTorch's older spelling of ``ember.ao.quantization``."""

from ember.ao.quantization import *  # noqa: F401, F403
from ember.ao.quantization import quantize_dynamic  # noqa: F401
