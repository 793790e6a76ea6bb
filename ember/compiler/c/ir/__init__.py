"""The C backend's loop IR: buffers, index expressions, statements and kernel kinds as data."""
