"""Utilities (``ember.utils.data`` for datasets, samplers and the DataLoader)."""

from ember.utils import data, safetensors  # noqa: F401
