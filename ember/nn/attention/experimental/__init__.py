"""Experimental attention APIs (PyTorch's ``torch.nn.attention.experimental``)."""
