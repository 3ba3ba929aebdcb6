"""A small character-level GPT, written once as a PyTorch tutorial writes it, for any
``torch``-like namespace: the real ``torch`` or ``dispatch_jit``.

``build(torch)`` defines the classes of nanoGPT / Karpathy's "makemore" (a
``CausalSelfAttention`` of ``view``/``transpose``/``@``/``masked_fill``/``softmax``
under a ``register_buffer``'d ``tril`` mask, an ``MLP`` with ``F.gelu``, a
pre-LayerNorm ``Block``, a ``GPT`` with token and position ``nn.Embedding``
tables, an ``nn.ModuleList`` of blocks and ``F.cross_entropy`` on the
``(B*T, V)`` view of the logits), the batch sampler (``torch.randint`` offsets
into the encoded text) and the training step (zero_grad, forward, backward,
``nn.utils.clip_grad_norm_``, ``AdamW``) from the namespace it is given, so the
same source runs on both libraries: ``build(dispatch_jit)`` is the line
``import dispatch_jit as torch`` at the top of a tutorial.

Where the two differ, the source takes what PyTorch users also write:

* ``torch.randint(0, high, size)`` with ``low`` given (both accept it);
* sampling: ``torch.multinomial`` where the namespace has one, else the Gumbel-max
  draw ``argmax(logits - log(-log(u)))`` with ``u = torch.rand_like(logits)``,
  which samples the same distribution (``generate``; not part of the timed step);
* dropout 0 by default (the ``nn.Dropout`` modules are there, as in nanoGPT):
  the timed step is deterministic, so its modes can be compared bit for bit.

The text (``corpus``) is the Zen of Python, decoded from the standard library's
``this`` module without importing it (importing it prints): it ships with every
CPython and never changes.

>>> import dispatch_jit as dj
>>> g = build(dj)
>>> data, stoi, itos = encode(corpus())
>>> cfg = g.GPTConfig(vocab_size=len(stoi), block_size=8, n_layer=1, n_head=2, n_embd=8)
>>> _ = dj.manual_seed(0)
>>> model = g.GPT(cfg)
>>> x, y = g.get_batch(dj.tensor(data), 8, 4)
>>> logits, loss = model(x, y)
>>> tuple(logits.shape), loss.shape
((4, 8, 45), ())
"""

from __future__ import annotations

import codecs
import importlib.util
import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..jit.source import namespace

__all__ = ["build", "corpus", "encode", "decode", "GPTConfig", "SIZES"]


@dataclass
class GPTConfig:
    """nanoGPT's config; the defaults are the issue's model (block 32, width 64, 2 blocks)."""
    vocab_size: int = 45          # the Zen of Python's distinct characters
    block_size: int = 32
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True


# size -> (config overrides, batch size): "gpt" is the model; "gpt-tiny" is for tests
SIZES = {"gpt": ({}, 16), "gpt-tiny": ({"block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16}, 4)}


def corpus() -> str:
    """The Zen of Python (the text of ``import this``), decoded from ``this.py``'s source."""
    spec = importlib.util.find_spec("this")
    src = spec.loader.get_source("this")
    # this.py is a rot13 string and a loop that prints it: keep the string, skip the print
    ns = namespace(src.split("\nd = {}")[0], {}, "this.py")
    return codecs.decode(ns["s"], "rot13")


def encode(text: str):
    """(int64 array of token ids, char -> id, id -> char): one token per distinct character."""
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    return np.array([stoi[c] for c in text], dtype=np.int64), stoi, dict(enumerate(chars))


def decode(ids, itos) -> str:
    return "".join(itos[int(i)] for i in ids)


def build(torch) -> SimpleNamespace:
    """The model's classes, ``get_batch``, ``train_step`` and ``generate``, written against
    ``torch`` (the real one, or ``dispatch_jit``)."""
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):

        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            # key, query, value projections for all heads, in a batch
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            # causal mask: each position attends to itself and the positions before it
            self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                 .view(1, 1, config.block_size, config.block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)   # (B, nh, T, hs)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v                                                      # (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):

        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))

    class Block(nn.Module):

        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.n_embd)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.n_embd)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):

        def __init__(self, config):
            super().__init__()
            self.config = config
            self.wte = nn.Embedding(config.vocab_size, config.n_embd)
            self.wpe = nn.Embedding(config.block_size, config.n_embd)
            self.drop = nn.Dropout(config.dropout)
            self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
            self.ln_f = nn.LayerNorm(config.n_embd)
            self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        def forward(self, idx, targets=None):
            B, T = idx.size()
            pos = torch.arange(0, T, dtype=torch.long)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(B * T, logits.size(-1)), targets.view(B * T))
            return logits, loss

    def get_batch(data, block_size: int, batch_size: int):
        """``batch_size`` random windows of the text and the same windows shifted by one."""
        ix = torch.randint(0, len(data) - block_size, (batch_size,))
        x = torch.stack([data[i:i + block_size] for i in ix.tolist()])
        y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix.tolist()])
        return x, y

    def make_optimizer(model, lr: float = 1e-3):
        return torch.optim.AdamW(model.parameters(), lr=lr)

    def train_step(model, optimizer, x, y, grad_clip: float = 1.0):
        optimizer.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        return loss

    def generate(model, idx, max_new_tokens: int, temperature: float = 1.0):
        """Extend ``idx`` (B, T) by ``max_new_tokens`` sampled tokens."""
        multinomial = getattr(torch, "multinomial", None)
        with torch.no_grad():
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -model.config.block_size:]
                logits, _ = model(idx_cond)
                logits = logits[:, -1, :] / temperature
                if multinomial is not None:
                    idx_next = multinomial(F.softmax(logits, dim=-1), num_samples=1)
                else:   # Gumbel-max: the same distribution as multinomial(softmax(logits))
                    u = torch.rand_like(logits).clamp(1e-10, 1.0)
                    idx_next = torch.argmax(logits - torch.log(-torch.log(u)), dim=-1, keepdim=True)
                idx = torch.cat((idx, idx_next), dim=1)
        return idx

    return SimpleNamespace(GPTConfig=GPTConfig, CausalSelfAttention=CausalSelfAttention, MLP=MLP, Block=Block,
                           GPT=GPT, get_batch=get_batch, make_optimizer=make_optimizer, train_step=train_step,
                           generate=generate)
