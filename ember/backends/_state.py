"""Process-wide settings behind ``ember.backends`` and ``ember.set_float32_matmul_precision``."""

float32_matmul_precision = "highest"
deterministic = False
deterministic_warn_only = False
