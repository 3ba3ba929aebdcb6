"""The per-op costs of the eager GPT step (dispatch_jit/tools/gpt.py, issue 26 part 5), dj
against torch on the model's own modules, shapes and weights.

The model: batch 16, block 32, width 64, 4 heads, vocab 45, float32, built by ``build(dj)`` and
``build(torch)`` from the same initial weights (tools/gpt_training.py's ``setup``), one training
step's forward and backward run on each so that every parameter has a gradient.  The rows:

* ``layer_norm``: the first block's ``ln_1`` on the embeddings, (16, 32, 64), forward (the
  autograd graph recorded, as in the step) and forward + backward; ``layer_norm_bwd``: the
  backward op alone (dj's ``_layer_norm_backward``, which recomputes each row's mean and 1/std,
  against torch's ``native_layer_norm_backward``, which is handed the forward's);
* ``embedding``: ``wte(idx) + wpe(pos)`` as the model's forward writes it, (16, 32) token ids
  and ``arange(32)``, forward + backward (the gradients of both tables: a scatter-add);
* ``cross_entropy``: ``F.cross_entropy`` on the model's (512, 45) logits, forward + backward;
* ``clip_grad_norm``: ``clip_grad_norm_(model.parameters(), 1.0)`` over the GPT's parameters
  with their gradients (after the first call the norm sits at 1.0, so every call still scales);
* ``adamw_step``: one ``AdamW.step()`` over the GPT's parameters (its state made in setup);
* ``softmax_fwd``: the attention's softmax over the last dim of its masked, scaled (16, 4, 32, 32)
  scores (requiring grad: the node recorded, as in the step);
* ``softmax_bwd``: ``_softmax_backward_data`` of the attention's (16, 4, 32, 32) probabilities
  (softmax of the embeddings' scaled self-products under the causal mask's -inf) and a fixed gradient of
  the same shape (``arange % 7 - 3``);
* ``gelu_fwd``, ``gelu_fwd_bwd``: ``F.gelu`` (exact form) on the MLP's (16, 32, 256) hidden
  activations (the first block's ``c_fc`` of the embeddings), forward and forward + backward.

Backwards run through ``autograd.grad`` (no ``.grad`` accumulation between calls, as after
``zero_grad(set_to_none=True)`` in the step).

Target (issue 26): each op <= 1.0 x torch eager (``track_ratio_<op>_dj_over_torch``, dj's time over torch's):
the eager step's target is dj <= 1.0 x torch, and these are the ops that dominate it.
Ratios are of minima over ``ROUNDS`` interleaved rounds of ``REPS`` calls each, in one process,
torch at 1 thread (no op here reaches dj's parallel threshold, 2**18 elements, so dj runs one
thread too).  Without torch the ratios are skipped (setup raises NotImplementedError); the
``time_<op>`` rows (dj alone) still run.
"""

from __future__ import annotations

import functools
import time

from ._common import torch_or_skip

OPS = ["layer_norm_fwd", "layer_norm_fwd_bwd", "layer_norm_bwd", "embedding_fwd_bwd", "cross_entropy_fwd_bwd",
       "clip_grad_norm", "adamw_step", "softmax_fwd", "softmax_bwd", "gelu_fwd", "gelu_fwd_bwd"]


def _ops(lib, s):
    """name -> a function of no arguments running that op once, for ``lib`` (dispatch_jit or torch),
    on a GPT built from ``s``'s initial weights after one forward and backward of its first batch."""
    from dispatch_jit.tools.gpt import build
    g = build(lib)
    model = g.GPT(s.cfg)
    model.load_state_dict({k: lib.tensor(v) for k, v in s.init.items()})
    opt = g.make_optimizer(model)
    idx, targets = (lib.tensor(a) for a in s.batches[0])
    logits, loss = model(idx, targets)
    loss.backward()
    F, grad = lib.nn.functional, lib.autograd.grad
    B, T = idx.shape
    params = list(model.parameters())
    wte, wpe, ln = model.wte, model.wpe, model.h[0].ln_1
    with lib.no_grad():
        emb = wte(idx) + wpe(lib.arange(0, T, dtype=lib.long))
    x = emb.detach().clone().requires_grad_(True)
    g_x = lib.ones_like(x)
    z = logits.detach().view(B * T, logits.size(-1)).clone().requires_grad_(True)
    y = targets.view(B * T)

    with lib.no_grad():
        h = model.h[0].mlp.c_fc(emb)
        q = lib.matmul(emb, emb.transpose(1, 2)).view(B, 1, T, T).expand(B, 4, T, T)
        mask = lib.ones(T, T).tril().view(1, 1, T, T) == 0
        att = lib.softmax(q.masked_fill(mask, float("-inf")) * 0.125, -1).contiguous()
    h = h.detach().clone().requires_grad_(True)
    scores = (q.masked_fill(mask, float("-inf")) * 0.125).contiguous().requires_grad_(True)
    # torch's backward op takes the forward's mean and 1/std; dj's recomputes them from the input
    if lib.__name__ == "torch":
        stats = lib.ops.aten.native_layer_norm(x.detach(), (x.shape[-1],), ln.weight, ln.bias, 1e-5)[1:]
        mean, rstd = (a.detach() for a in stats)
        ln_bwd_args = (g_x, x.detach(), (x.shape[-1],), mean, rstd, ln.weight, ln.bias, [True, True, True])
        ln_bwd = lib.ops.aten.native_layer_norm_backward
    else:
        ln_bwd_args = (g_x, x.detach(), 1, ln.weight, 1e-5, [True, True, True])
        ln_bwd = lib.ops.aten._layer_norm_backward
    g_h, g_att = lib.ones_like(h), (lib.arange(0, att.numel(), dtype=lib.float32).view(att.shape) % 7 - 3.0)
    # torch's op names the input's dtype; dj's schema takes the gradient's
    softmax_bwd_args = (g_att, att, 3) + ((lib.float32,) if lib.__name__ == "torch" else ())

    def layer_norm_bwd():
        with lib.no_grad():      # as the backward pass runs it (no create_graph)
            return ln_bwd(*ln_bwd_args)

    def embedding_fwd_bwd():
        out = wte(idx) + wpe(lib.arange(0, T, dtype=lib.long))
        return grad(out, (wte.weight, wpe.weight), g_x)

    runs = {
        "layer_norm_fwd": lambda: ln(x),
        "layer_norm_fwd_bwd": lambda: grad(ln(x), (x, ln.weight, ln.bias), g_x),
        "layer_norm_bwd": layer_norm_bwd,
        "embedding_fwd_bwd": embedding_fwd_bwd,
        "cross_entropy_fwd_bwd": lambda: grad(F.cross_entropy(z, y), (z,)),
        "clip_grad_norm": lambda: lib.nn.utils.clip_grad_norm_(params, 1.0),
        "adamw_step": opt.step,
        "softmax_fwd": lambda: lib.softmax(scores, -1),
        "softmax_bwd": lambda: lib.ops.aten._softmax_backward_data(*softmax_bwd_args),
        "gelu_fwd": lambda: F.gelu(h),
        "gelu_fwd_bwd": lambda: grad(F.gelu(h), (h,), g_h),
    }
    for f in runs.values():        # warm-up: kernels compiled, AdamW's state made
        f()
        f()
    return runs


@functools.cache
def _setup():
    from dispatch_jit.tools.gpt_training import setup
    return setup("gpt")


@functools.cache
def _runs(lib_name: str) -> dict:
    """The op functions of ``lib_name`` ("dj" or "torch"), made once per process."""
    if lib_name == "torch":
        lib = torch_or_skip(1)
    else:
        import dispatch_jit as lib
    return _ops(lib, _setup())


def _min_ratio(a, b, rounds: int, reps: int) -> float:
    """The least per-call time of ``a`` over ``rounds`` rounds of ``reps`` calls, over the same of
    ``b``, the rounds interleaved (a shared machine's load drifts; the least disturbed rounds
    compare)."""
    best = [float("inf"), float("inf")]
    for _ in range(rounds):
        for i, fn in enumerate((a, b)):
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / reps)
    return best[0] / best[1]


class GPTOps:
    """Seconds per call of each GPT op in dj alone (no torch needed).  Target: see the ratios
    (``GPTOpsVsTorch``); these track dj's own cost over time."""

    params = [OPS]
    param_names = ["op"]
    timeout = 300

    def setup(self, op):
        self.run = _runs("dj")[op]

    def time_op(self, op):
        self.run()


class GPTOpsVsTorch:
    """dj / torch per GPT op, torch at 1 thread, minima of interleaved rounds.  Target: each
    <= 1.0 (skipped without torch)."""

    unit = "ratio"
    timeout = 300
    ROUNDS = 15
    REPS = 20

    def setup(self):
        torch_or_skip(1)

    def _ratio(self, op: str) -> float:
        torch_or_skip(1)          # another suite in the same process may have set 2 threads
        return _min_ratio(_runs("dj")[op], _runs("torch")[op], self.ROUNDS, self.REPS)

    def track_ratio_layer_norm_fwd_dj_over_torch(self):
        """layer_norm forward, (16, 32, 64).  Target <= 1.0."""
        return self._ratio("layer_norm_fwd")

    def track_ratio_layer_norm_fwd_bwd_dj_over_torch(self):
        """layer_norm forward + backward (input, weight, bias).  Target <= 1.0."""
        return self._ratio("layer_norm_fwd_bwd")

    def track_ratio_layer_norm_bwd_dj_over_torch(self):
        """The layer_norm backward op alone, (16, 32, 64), all three gradients.  Target <= 1.0."""
        return self._ratio("layer_norm_bwd")

    def track_ratio_embedding_fwd_bwd_dj_over_torch(self):
        """wte(idx) + wpe(pos) forward + backward to both tables.  Target <= 1.0."""
        return self._ratio("embedding_fwd_bwd")

    def track_ratio_cross_entropy_fwd_bwd_dj_over_torch(self):
        """cross_entropy on (512, 45) logits, forward + backward.  Target <= 1.0."""
        return self._ratio("cross_entropy_fwd_bwd")

    def track_ratio_clip_grad_norm_dj_over_torch(self):
        """clip_grad_norm_ over the GPT's parameters and gradients.  Target <= 1.0."""
        return self._ratio("clip_grad_norm")

    def track_ratio_adamw_step_dj_over_torch(self):
        """One AdamW.step() over the GPT's parameters.  Target <= 1.0."""
        return self._ratio("adamw_step")

    def track_ratio_softmax_fwd_dj_over_torch(self):
        """The attention's softmax forward, (16, 4, 32, 32) float32, grad recorded.  Target <= 1.0."""
        return self._ratio("softmax_fwd")

    def track_ratio_softmax_bwd_dj_over_torch(self):
        """The attention's softmax backward, (16, 4, 32, 32) float32.  Target <= 1.0."""
        return self._ratio("softmax_bwd")

    def track_ratio_gelu_fwd_dj_over_torch(self):
        """gelu forward on the MLP's (16, 32, 256) activations.  Target <= 1.0."""
        return self._ratio("gelu_fwd")

    def track_ratio_gelu_fwd_bwd_dj_over_torch(self):
        """gelu forward + backward on the MLP's activations.  Target <= 1.0."""
        return self._ratio("gelu_fwd_bwd")
