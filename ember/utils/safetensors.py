"""``ember.utils.safetensors``: read and write ``.safetensors`` files (bfloat16 included).

The implementation lives in ``ember.serialization.safetensors``; this is its public alias.
"""

from ember.serialization.safetensors import *  # noqa: F401,F403
from ember.serialization.safetensors import __all__  # noqa: F401
