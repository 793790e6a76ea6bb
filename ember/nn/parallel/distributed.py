"""``DistributedDataParallel``: importable; it needs an initialized process group."""

from __future__ import annotations

import sys
from typing import Any

from ember.errors import EmberNotImplementedError, EmberValueError
from ember.nn.modules.module import Module


class DistributedDataParallel(Module):
    """PyTorch's DDP.  Without an initialized process group (``ember.distributed`` has none
    yet) construction raises PyTorch's ``ValueError``."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0, broadcast_buffers: Any = None, init_sync: bool = True,
                 process_group: Any = None, bucket_cap_mb: Any = None,
                 find_unused_parameters: bool = False, **kwargs: Any) -> None:
        # ember.distributed is a higher layer: look it up only if something imported it
        dist = sys.modules.get("ember.distributed")
        if dist is None or not dist.is_initialized():
            raise EmberValueError("[DistributedDataParallel] Default process group has not been "
                                  "initialized, please make sure to call init_process_group.")
        raise EmberNotImplementedError("[DistributedDataParallel] ember has no gradient "
                                       "all-reduce for DDP yet")
