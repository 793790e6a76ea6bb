"""``default_collate`` / ``default_convert``: PyTorch's rules for turning samples into batches.

A batch of tensors is stacked; NumPy arrays and NumPy scalars become tensors; Python floats a
float64 tensor, ints an int64 tensor (bools a bool tensor); strings stay a list; mappings,
namedtuples and sequences are collated field by field (tuples come back as lists).

>>> default_collate([(1, 2.0), (3, 4.0)])
[tensor([1, 3]), tensor([2., 4.], dtype=ember.float64)]
"""

from __future__ import annotations

import collections.abc
import copy
import re
from typing import Any, Callable

import numpy as np

from ember import dtypes as _dt
from ember._frontend.creation import as_tensor, tensor
from ember._frontend.movement import stack
from ember.tensor import Tensor

__all__ = ["collate", "default_collate", "default_collate_fn_map", "default_convert"]

np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"
)

CollateMap = dict


def collate_tensor_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    return stack(batch, 0)


def collate_numpy_array_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Any:
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    # PyTorch keeps the scalars' NumPy dtype (a list of np.float64 gives float64); going
    # through one ndarray does that when all scalars share a type.
    if all(type(b) is type(batch[0]) for b in batch):
        return as_tensor(np.asarray(batch))
    return as_tensor(batch)


def collate_float_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    return tensor(batch, dtype=_dt.float64)


def collate_int_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> Tensor:
    return tensor(batch)


def collate_str_fn(batch: list, *, collate_fn_map: CollateMap | None = None) -> list:
    return batch


# Order matters: exact types are looked up first, then isinstance in this order (so
# np.float64, a float subclass, is a NumPy scalar, and bool, an int subclass, is an int).
default_collate_fn_map: dict[Any, Callable] = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def collate(batch: list, *, collate_fn_map: CollateMap | None = None) -> Any:
    """Collate ``batch`` (a list of samples) using the per-type functions of
    ``collate_fn_map``; containers are handled here, recursively."""
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map)
                  for key in elem}
        try:
            if isinstance(elem, collections.abc.MutableMapping):
                clone = copy.copy(elem)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # namedtuple
        return elem_type(*(collate(s, collate_fn_map=collate_fn_map) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        it = iter(batch)
        elem_size = len(next(it))
        if not all(len(e) == elem_size for e in it):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        fields_list = [collate(s, collate_fn_map=collate_fn_map) for s in transposed]
        if isinstance(elem, tuple):
            return fields_list  # PyTorch's backwards-compatible choice: tuples become lists
        try:
            if isinstance(elem, collections.abc.MutableSequence):
                clone = copy.copy(elem)
                for i, f in enumerate(fields_list):
                    clone[i] = f
                return clone
            return elem_type(fields_list)
        except TypeError:
            return fields_list
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def default_collate(batch: list) -> Any:
    """Stack a list of samples into a batch with PyTorch's rules (module docstring)."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def default_convert(data: Any) -> Any:
    """Convert NumPy arrays/scalars inside ``data`` to tensors (no batching); used when the
    DataLoader's ``batch_size`` is None."""
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_", "bytes_"):
        if elem_type.__name__ == "ndarray" and \
                np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(data[key]) for key in data}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(fields)
                return clone
            return elem_type(fields)
        except TypeError:
            return fields
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(data):
                    clone[i] = default_convert(d)
                return clone
            return elem_type([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
