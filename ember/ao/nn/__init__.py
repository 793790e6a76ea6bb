from ember.ao.nn import quantized  # noqa: F401
