"""``ember.nn.attention``: attention building blocks beyond ``scaled_dot_product_attention``.

``ember.nn.attention.flex_attention`` holds PyTorch's FlexAttention API (``flex_attention``,
``create_block_mask``, ``BlockMask``, ``and_masks``/``or_masks``/``noop_mask``); see
docs/flex_attention.md.  As in PyTorch, ``import ember`` loads this package but not the
``flex_attention`` submodule: ``from ember.nn.attention.flex_attention import flex_attention``.
"""
