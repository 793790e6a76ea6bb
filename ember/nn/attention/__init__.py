"""``ember.nn.attention``: attention building blocks beyond ``scaled_dot_product_attention``.

``ember.nn.attention.flex_attention`` holds PyTorch's FlexAttention API (``flex_attention``,
``create_block_mask``, ``BlockMask``, ``and_masks``/``or_masks``/``noop_mask``); see
docs/flex_attention.md.
"""

from ember.nn.attention import flex_attention  # noqa: F401
