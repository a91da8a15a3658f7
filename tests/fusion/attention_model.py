"""The small self-attention module the fusion tests compile."""

from __future__ import annotations

from torch import nn


class Attention(nn.Module):
    """One fused QKV projection, 2 heads of 8 features, ``scaled_dot_product_attention``."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).reshape(1, -1, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return nn.functional.scaled_dot_product_attention(q, k, v)
