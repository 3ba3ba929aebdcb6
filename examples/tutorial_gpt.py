"""A character-level GPT written as PyTorch tutorials write one, run on PyTorch or on dispatch_jit.

The model and the training loop below are plain PyTorch (token and position embeddings, a
``ModuleList`` of blocks, multi-head causal self-attention from a registered ``tril`` buffer and
``masked_fill``, a GELU MLP, LayerNorm, ``F.cross_entropy``, AdamW with a cosine learning-rate
schedule, gradient clipping, batches from ``torch.randint``, text sampled with
``torch.multinomial``); only the imports at the top of ``run`` differ between the backends.
The text is the Zen of Python (``import this``), which ships with every Python.

    python examples/tutorial_gpt.py                 # dispatch_jit
    python examples/tutorial_gpt.py --backend torch # the same program on PyTorch
"""

from __future__ import annotations

import argparse

from dispatch_jit.tools.gpt import corpus


def run(backend: str = "dj", steps: int = 200, seed: int = 0, verbose: bool = True) -> dict:
    """Train, then sample; returns {"losses": the training losses, "sample": generated text}."""
    if backend == "torch":
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    else:
        import dispatch_jit as torch
        import dispatch_jit.nn as nn
        import dispatch_jit.nn.functional as F

    # ---- from here on, the program is the same on both backends ----
    torch.manual_seed(seed)
    batch_size, block_size, n_embd, n_head, n_layer, dropout = 16, 32, 64, 4, 2, 0.0

    text = corpus()
    chars = sorted(set(text))
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    def get_batch():
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([data[i:i + block_size] for i in ix])
        y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
        return x, y

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(n_embd, 3 * n_embd)
            self.proj = nn.Linear(n_embd, n_embd)
            self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)))

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(n_embd, dim=2)
            q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
            k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
            v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (C // n_head) ** 0.5)
            att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            return self.proj(y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(n_embd)
            self.attn = CausalSelfAttention()
            self.ln2 = nn.LayerNorm(n_embd)
            self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd),
                                     nn.Dropout(dropout))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab_size, n_embd)
            self.pos = nn.Embedding(block_size, n_embd)
            self.blocks = nn.ModuleList([Block() for _ in range(n_layer)])
            self.ln_f = nn.LayerNorm(n_embd)
            self.head = nn.Linear(n_embd, vocab_size)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            x = self.tok(idx) + self.pos(torch.arange(T))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln_f(x))
            if targets is None:
                return logits, None
            return logits, F.cross_entropy(logits.view(B * T, vocab_size), targets.view(B * T))

        @torch.no_grad()
        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                logits, _ = self(idx[:, -block_size:])
                probs = F.softmax(logits[:, -1, :], dim=-1)
                idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
            return idx

    model = GPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)

    losses = []
    for step in range(steps):
        xb, yb = get_batch()
        _, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
        if verbose and (step % max(steps // 5, 1) == 0 or step == steps - 1):
            print(f"step {step:4d}  loss {loss.item():.4f}")

    model.eval()
    out = model.generate(torch.zeros((1, 1), dtype=torch.long), max_new_tokens=80)
    sample = "".join(itos[i] for i in out[0].tolist())
    if verbose:
        print(sample)
    return {"losses": losses, "sample": sample}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A tutorial-style character-level GPT on PyTorch or dispatch_jit.")
    parser.add_argument("--backend", choices=("dj", "torch"), default="dj", help="which library runs it")
    parser.add_argument("--steps", type=int, default=200, help="training steps")
    args = parser.parse_args()
    run(args.backend, args.steps)
