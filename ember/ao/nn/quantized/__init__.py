from ember.ao.nn.quantized import dynamic  # noqa: F401
