"""``ember.distributed``: PyTorch's ``torch.distributed`` on MPI.

Install the runtime with ``pip install mpi4py mpich`` (the ``distributed`` extra) and launch
with ``python -m ember.distributed.run --nproc-per-node 2 script.py`` (or ``mpiexec -n 2 python
script.py``).  Backends ``"mpi"``, ``"gloo"`` and ``None`` all run on MPI, so scripts written for
``torch.distributed`` with gloo run unchanged.  Without ``mpi4py``, ``is_available()`` is False
and ``init_process_group`` raises ``EmberNotImplementedError``; the other functions raise
PyTorch's ``ValueError`` about an uninitialized default group.  See docs/distributed.md.

>>> import ember.distributed as dist
>>> dist.is_initialized()
False
"""

from __future__ import annotations

from ember.distributed import _symmetric_memory  # noqa: F401 (registers ember.ops.symm_mem)
from ember.distributed._collectives import (
    all_gather,
    all_gather_into_tensor,
    all_gather_single,
    all_reduce,
    all_to_all,
    all_to_all_single,
    broadcast,
    gather,
    reduce,
    reduce_scatter,
    reduce_scatter_single,
    reduce_scatter_tensor,
    scatter,
)
from ember.distributed._group import (
    GroupMember,
    ProcessGroup,
    ReduceOp,
    Work,
    barrier,
    destroy_process_group,
    get_backend,
    get_global_rank,
    get_group_rank,
    get_process_group_ranks,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    is_available,
    is_gloo_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    new_group,
)
from ember.distributed._objects import all_gather_object, broadcast_object_list, gather_object
from ember.distributed._p2p import P2POp, batch_isend_irecv, irecv, isend, recv, send
from ember.distributed._store import DistStoreError, TCPStore

__all__ = ["DistStoreError", "GroupMember", "P2POp", "ProcessGroup", "ReduceOp", "TCPStore",
           "Work", "all_gather", "all_gather_into_tensor", "all_gather_object",
           "all_gather_single", "all_reduce", "all_to_all", "all_to_all_single", "barrier",
           "batch_isend_irecv", "broadcast", "broadcast_object_list", "destroy_process_group",
           "gather", "gather_object", "get_backend", "get_global_rank", "get_group_rank",
           "get_process_group_ranks", "get_rank", "get_world_size", "group", "init_process_group",
           "irecv", "is_available", "is_gloo_available", "is_initialized", "is_mpi_available",
           "is_nccl_available", "isend", "new_group", "recv", "reduce", "reduce_scatter",
           "reduce_scatter_single", "reduce_scatter_tensor", "scatter", "send"]
