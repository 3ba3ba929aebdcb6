"""``MultiheadAttention``, PyTorch's module: its parameters (``in_proj_weight``/``in_proj_bias``
packed, or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when ``kdim``/``vdim`` differ,
and ``out_proj``: the same ``state_dict`` keys, so a PyTorch checkpoint loads), its
initialization, ``batch_first``, unbatched inputs, ``key_padding_mask`` and ``attn_mask``
(boolean: True masks out, the opposite of SDPA's; or float, added), ``need_weights`` and
``average_attn_weights``.  Without weights it runs ``F.scaled_dot_product_attention``; with
them the same math with the softmax kept.  ``add_bias_kv`` appends learned ``bias_k``/``bias_v``
to the keys and values, ``add_zero_attn`` a zero key and value per head, as PyTorch's.

>>> import dispatch_jit as dj
>>> _ = dj.manual_seed(0)
>>> mha = dj.nn.MultiheadAttention(8, 2, batch_first=True)
>>> x = dj.ones(3, 5, 8)
>>> out, w = mha(x, x, x)
>>> out.shape, w.shape
((3, 5, 8), (3, 5, 5))
"""

from __future__ import annotations

import math

import numpy as np

from ..creation import empty, zeros
from ..errors import DTypeError, SchemaError, ShapeError
from ..ops import entries
from ..tensor import wrap
from . import functional as F
from . import init
from .module import Module, Parameter
from .modules import Linear

__all__ = ["MultiheadAttention"]

A = entries("aten")


def _float_mask(mask, dtype, who: str):
    """A boolean mask (True: masked out) as -inf/0, a float one as it is."""
    if mask is None:
        return None
    if mask.dtype.name == "bool":
        neg = wrap(np.array(-np.inf, dtype.np))
        zero = wrap(np.array(0.0, dtype.np))
        if mask.is_cuda:
            neg, zero = neg.to(mask.device), zero.to(mask.device)
        return A.where(mask, neg, zero)
    if mask.dtype.category != 2:
        raise DTypeError(f"only bool and floating types of {who} are supported, got {mask.dtype.name}")
    return mask.to(dtype)


class MultiheadAttention(Module):
    """Attention over ``num_heads`` heads of ``embed_dim // num_heads`` each."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise SchemaError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                              f"num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise SchemaError("embed_dim must be divisible by num_heads")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        kw = dict(dtype=dtype, device=device)
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:     # xavier_normal_ of a (1, 1, E) tensor: std sqrt(2 / (E + E))
            for b in (self.bias_k, self.bias_v):
                init.normal_(b, 0.0, math.sqrt(1.0 / self.embed_dim))

    def _projections(self, query, key, value):
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[0:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            wq, wk, wv = w[0:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
                average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise SchemaError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                              "method `generate_square_subsequent_mask` to create this mask.")
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query "
                             f"tensor (key {key.ndim}-D, value {value.ndim}-D; all must match)")
        if not batched:
            query, key, value = (A.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = A.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (A.transpose(t, 0, 1) for t in (query, key, value))
        # (L, N, E) from here, as PyTorch's multi_head_attention_forward
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise ShapeError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        if key.shape[:2] != value.shape[:2] or key.shape[1] != N:
            raise ShapeError(f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)} or the "
                             f"query's batch ({N})")
        q, k, v = self._projections(query, key, value)
        if self.bias_k is not None:
            k = A.cat([k, A.expand(self.bias_k, [1, N, E])], 0)
            v = A.cat([v, A.expand(self.bias_v, [1, N, E])], 0)
        h, hd = self.num_heads, self.head_dim
        q, k, v = (A.permute(A.reshape(t, [t.shape[0], N, h, hd]), [1, 2, 0, 3]) for t in (q, k, v))   # (N, h, *, hd)
        if self.add_zero_attn:
            zero = zeros(N, h, 1, hd, dtype=k.dtype, device=k.device)
            k, v = A.cat([k, zero], 2), A.cat([v, zero], 2)
        mask = self._merged_mask(attn_mask, key_padding_mask, q.dtype, N, L, S, k.shape[2] - S)
        p = self.dropout if self.training else 0.0
        if not need_weights:
            out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        else:
            scores = A.mul(A.matmul(q, A.transpose(k, -2, -1)), 1.0 / math.sqrt(hd))
            if mask is not None:
                scores = A.add(scores, mask)
            weights = A.softmax(scores, -1)
            if p > 0.0:
                weights = F.dropout(weights, p, True)
            out = A.matmul(weights, v)
            if average_attn_weights:
                weights = A.mean(weights, [1])
            if not batched:
                weights = A.squeeze(weights, [0])
        out = self.out_proj(A.reshape(A.permute(out, [2, 0, 1, 3]), [L, N, E]))    # (L, N, E)
        if not batched:
            out = A.squeeze(out, [1])
        elif self.batch_first:
            out = A.transpose(out, 0, 1)
        return out, weights

    def _merged_mask(self, attn_mask, key_padding_mask, dtype, N, L, S, extra):
        """attn_mask (L, S) or (N*heads, L, S) and key_padding_mask (N, S) as one float mask
        broadcastable to (N, heads, L, S + extra), or None: the ``extra`` keys (bias_k, the zero
        key) are never masked, as PyTorch pads its masks for them."""
        h = self.num_heads
        am = _float_mask(attn_mask, dtype, "attn_mask")
        if am is not None:
            if tuple(am.shape) == (L, S):
                am = A.reshape(am, [1, 1, L, S])
            elif tuple(am.shape) == (N * h, L, S):
                am = A.reshape(am, [N, h, L, S])
            else:
                raise ShapeError(f"The shape of the attn_mask is {tuple(am.shape)}, but should be {(L, S)} or "
                                 f"{(N * h, L, S)}.")
            am = F.pad(am, (0, extra)) if extra else am
        kpm = _float_mask(key_padding_mask, dtype, "key_padding_mask")
        if kpm is not None:
            if tuple(kpm.shape) != (N, S):
                raise ShapeError(f"expecting key_padding_mask shape of {(N, S)}, but got {tuple(kpm.shape)}")
            kpm = A.reshape(F.pad(kpm, (0, extra)) if extra else kpm, [N, 1, 1, S + extra])
            am = kpm if am is None else A.add(am, kpm)
        return am

