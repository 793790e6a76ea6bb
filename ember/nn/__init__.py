"""Neural-network building blocks (``ember.nn.functional`` now; modules with issue 3)."""

from ember.nn import functional  # noqa: F401
