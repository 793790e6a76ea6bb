"""``ember.nn.utils``: gradient clipping, parameter/vector conversion and ``rnn`` (packed
sequences)."""

from ember.nn.utils import rnn  # noqa: F401
from ember.nn.utils.clip_grad import (  # noqa: F401
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from ember.nn.utils.convert_parameters import (  # noqa: F401
    parameters_to_vector,
    vector_to_parameters,
)
