"""Errors raised while saving or loading."""

from __future__ import annotations

import pickle

from ember.errors import EmberError


class SerializationError(EmberError, RuntimeError):
    """A file cannot be written or read: unrepresentable object, corrupt or hostile data."""


class UnpicklingError(EmberError, pickle.UnpicklingError):
    """A pickle refers to a global outside the allowlist, or is malformed."""
