"""``ember.nn.utils.rnn``: variable-length batches for recurrent layers, as in PyTorch.

A ``PackedSequence`` stores a batch of sequences time-major without padding: ``data`` holds the
rows of step 0 of every sequence, then step 1 of the sequences still running, and so on;
``batch_sizes[t]`` (an int64 CPU tensor) says how many sequences are running at step ``t``.
Sequences are sorted by decreasing length; ``sorted_indices`` / ``unsorted_indices`` map between
that order and the caller's (``None`` when the caller's batch was already sorted).

Everything is composed from ember ops (slicing, ``cat``, ``stack``, ``index_select``), so
gradients flow through packing and padding.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from ember import dtypes as _dt
from ember._frontend.creation import arange, as_tensor, empty_like, full, tensor
from ember._frontend.movement import cat, stack
from ember._frontend.sort import sort
from ember.errors import EmberRuntimeError, EmberValueError, ShapeError
from ember.tensor import Tensor

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
           "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence"]


class PackedSequence_(NamedTuple):  # noqa: N801 (PyTorch's name)
    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


def _bind(optional: Any, fn: Any) -> Any:
    return None if optional is None else fn(optional)


class PackedSequence(PackedSequence_):
    """The data and batch sizes of a packed batch of variable-length sequences.

    Build one with :func:`pack_padded_sequence` or :func:`pack_sequence`, not by hand.

    Example::

        >>> p = pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5])])
        >>> p.data, p.batch_sizes
        (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    """

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise EmberValueError("[PackedSequence] expected data to be a list or tuple "
                                      "of length 2 (data, batch_sizes)")
            data, batch_sizes = data
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data`` converted with ``Tensor.to``; the indices follow its device."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return type(self)(data, self.batch_sizes,
                          _bind(self.sorted_indices, lambda t: t.to(data.device)),
                          _bind(self.unsorted_indices, lambda t: t.to(data.device)))

    def cpu(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self.to("cpu")

    def cuda(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self.to("cuda")

    def double(self) -> PackedSequence:
        return self.to(dtype=_dt.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=_dt.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=_dt.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=_dt.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=_dt.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=_dt.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=_dt.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=_dt.uint8)

    @property
    def is_cuda(self) -> bool:
        return False

    def is_pinned(self) -> bool:
        return False


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of a 1-D permutation tensor (``None`` stays ``None``)."""
    if permutation is None:
        return None
    output = empty_like(permutation)
    output.scatter_(0, permutation, arange(0, permutation.numel()))
    return output


def _lengths_list(lengths: Any) -> list[int]:
    if isinstance(lengths, Tensor):
        if lengths.dim() != 1:
            raise EmberRuntimeError(
                f"[pack_padded_sequence] 'lengths' argument should be a 1D CPU int64 tensor, "
                f"but got {lengths.dim()}D tensor")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def _pack_sorted(input: Tensor, lengths: list[int], batch_first: bool) -> tuple[Tensor, Tensor]:
    """PyTorch's ``_pack_padded_sequence`` on a batch already sorted by decreasing length."""
    op = "pack_padded_sequence"
    if batch_first:
        input = input.transpose(0, 1)
    batch = input.shape[1]
    if len(lengths) != batch:
        raise ShapeError(f"[{op}] Expected `len(lengths)` to be equal to batch_size, but got "
                         f"{len(lengths)} (batch_size={batch})")
    if not lengths or lengths[-1] <= 0:
        raise EmberRuntimeError(f"[{op}] Length of all samples has to be greater than 0, but "
                                "found an element in 'lengths' that is <= 0")
    if any(a < b for a, b in zip(lengths, lengths[1:])):
        raise EmberRuntimeError(
            f"[{op}] `lengths` array must be sorted in decreasing order when `enforce_sorted` is "
            "True. You can pass `enforce_sorted=False` to pack_padded_sequence and/or "
            "pack_sequence to sidestep this requirement if you do not need ONNX exportability.")
    if lengths[0] > input.shape[0]:
        raise ShapeError(f"[{op}] the longest length {lengths[0]} exceeds the padded sequence "
                         f"length {input.shape[0]}")
    sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    steps = input[: lengths[0]].unbind(0)
    data = cat([s if bs == batch else s[:bs] for s, bs in zip(steps, sizes)], 0)
    return data, tensor(sizes, dtype=_dt.int64)


def pack_padded_sequence(input: Tensor, lengths: Tensor | list[int], batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded ``(T, B, *)`` batch (``(B, T, *)`` with ``batch_first``) of sequences with
    the given lengths; ``enforce_sorted=False`` sorts the batch by decreasing length first.

    Example::

        >>> x = ember.tensor([[1, 2, 0], [3, 0, 0], [4, 5, 6]])
        >>> pack_padded_sequence(x, [2, 1, 3], batch_first=True, enforce_sorted=False).data
        tensor([4, 1, 3, 5, 2, 6])
    """
    n = _lengths_list(lengths)
    sorted_indices = None
    if not enforce_sorted:
        values, sorted_indices = sort(tensor(n, dtype=_dt.int64), descending=True)
        n = [int(v) for v in values.tolist()]
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    data, batch_sizes = _pack_sorted(input, n, batch_first)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def _pad_packed(data: Tensor, sizes: list[int], batch_first: bool, padding_value: float,
                total: int) -> tuple[Tensor, Tensor]:
    batch = sizes[0]
    trailing = tuple(data.shape[1:])
    steps, offset = [], 0
    for bs in sizes:
        step = data[offset: offset + bs]
        if bs < batch:
            step = cat([step, full((batch - bs, *trailing), padding_value, dtype=data.dtype)], 0)
        steps.append(step)
        offset += bs
    if total > len(sizes):
        steps.extend([full((batch, *trailing), padding_value, dtype=data.dtype)]
                     * (total - len(sizes)))
    out = stack(steps, 1 if batch_first else 0)
    lengths = [sum(1 for bs in sizes if bs > b) for b in range(batch)]
    return out, tensor(lengths, dtype=_dt.int64)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None
                        ) -> tuple[Tensor, Tensor]:
    """Undo :func:`pack_padded_sequence`: the padded batch (in the caller's original order) and
    the int64 lengths of its sequences.

    Example::

        >>> padded, lengths = pad_packed_sequence(packed, batch_first=True)
    """
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    max_len = len(sizes)
    if total_length is not None:
        if total_length < max_len:
            raise EmberValueError(
                "[pad_packed_sequence] Expected total_length to be at least the length of the "
                f"longest sequence in input, but got total_length={total_length} and max "
                f"sequence length being {max_len}")
        max_len = total_length
    padded, lengths = _pad_packed(sequence.data, sizes, batch_first, padding_value, max_len)
    unsorted = sequence.unsorted_indices
    if unsorted is not None:
        return padded.index_select(0 if batch_first else 1, unsorted), lengths[unsorted]
    return padded, lengths


def pad_sequence(sequences: Tensor | list[Tensor], batch_first: bool = False,
                 padding_value: float = 0.0, padding_side: str = "right") -> Tensor:
    """Stack sequences of shapes ``(L_i, *)`` into ``(T, B, *)`` (``(B, T, *)`` with
    ``batch_first``), padding each to the longest with ``padding_value`` on ``padding_side``.

    Example::

        >>> pad_sequence([ember.ones(3, 2), ember.ones(1, 2)]).shape
        ember.Size([3, 2, 2])
    """
    op = "pad_sequence"
    if not isinstance(sequences, Iterable):
        raise EmberRuntimeError(f"[{op}] pad_sequence: Expected iterable for input sequences, "
                                f"but got arg of type: {type(sequences)}")
    seqs = tuple(sequences)
    if not seqs:
        raise EmberRuntimeError(f"[{op}] received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise EmberRuntimeError(f"[{op}] Expected padding_side to be one of left or right, but "
                              f"got {padding_side}.")
    if any(s.dim() == 0 for s in seqs):
        raise ShapeError(f"[{op}] every sequence needs a length dimension, got a 0-D tensor")
    dtype, trailing = seqs[0].dtype, tuple(seqs[0].shape[1:])
    for s in seqs[1:]:
        if tuple(s.shape[1:]) != trailing:
            raise ShapeError(f"[{op}] all sequences must have the same trailing dimensions "
                             f"{list(trailing)}, but got {list(s.shape[1:])}")
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        s = s if s.dtype is dtype else s.to(dtype)
        missing = longest - s.shape[0]
        if missing:
            pad = full((missing, *trailing), padding_value, dtype=dtype)
            s = cat([s, pad] if padding_side == "right" else [pad, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor,
                   batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences of the given lengths.

    Like PyTorch, a ``(T, B, *)`` input (``batch_first=False``) is transposed in place.

    Example::

        >>> unpad_sequence(pad_sequence([a, b]), ember.tensor([a.size(0), b.size(0)]))
    """
    if not batch_first:
        padded_sequences.transpose_(0, 1)
    n = _lengths_list(as_tensor(lengths))
    if len(n) != padded_sequences.shape[0]:
        raise ShapeError(f"[unpad_sequence] got {len(n)} lengths for a batch of "
                         f"{padded_sequences.shape[0]} sequences")
    return [seq[:length] for seq, length in zip(padded_sequences.unbind(0), n)]


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """``pack_padded_sequence(pad_sequence(sequences), lengths)``.

    Example::

        >>> pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5]), ember.tensor([6])])
        PackedSequence(data=tensor([1, 4, 6, 2, 5, 3]), batch_sizes=tensor([3, 2, 1]), ...)
    """
    lengths = [v.size(0) for v in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences a ``PackedSequence`` holds, in the caller's original order.

    Example::

        >>> unpack_sequence(pack_sequence([ember.tensor([1, 2, 3]), ember.tensor([4, 5])]))
        [tensor([1, 2, 3]), tensor([4, 5])]
    """
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
