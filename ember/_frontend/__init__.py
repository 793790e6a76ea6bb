"""The frontend: public functions that broadcast, promote and fill defaults, then bind
registry primitives.  Importing this package attaches every Tensor method."""

from ember._frontend import core, creation, pointwise, reduction, shape  # noqa: F401
