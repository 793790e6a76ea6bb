"""``ember.nn.parallel``: PyTorch's data-parallel wrappers as they behave without GPUs.

``DataParallel(module)`` keeps ``module`` as ``.module`` (its state-dict keys get the
``module.`` prefix, as in PyTorch) and its forward calls the module directly: PyTorch does the
same when no CUDA device exists.  ``DistributedDataParallel`` averages gradients over an
``ember.distributed`` process group (without one, construction raises PyTorch's ``ValueError``).
"""

from ember.nn.parallel.data_parallel import DataParallel, data_parallel
from ember.nn.parallel.distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
