"""Dynamically quantized modules (PyTorch's ``torch.ao.nn.quantized.dynamic``)."""

from ember.ao.nn.quantized.dynamic.linear import Linear  # noqa: F401
from ember.ao.nn.quantized.dynamic.rnn import GRU, LSTM, GRUCell, LSTMCell, RNNCell  # noqa: F401
