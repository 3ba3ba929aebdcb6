"""A training loop in compiled mode reaches a steady state: after its first steps nothing is compiled
(no fused loop, no plan function, no Numba kernel of any kind), and every plan function it made can be
stored in the disk cache, so that a fresh process loads it instead of compiling it again.

The GPT step (tools/gpt_training.py) stalled for 90 s at its fourth lazy step: the plan function of the
whole backward and update was compiled in every process, never stored, because the layer-norm kernels
it calls had no fingerprint (their module's ``empty`` import shadowed ``np.empty``: jit/fingerprint.py).
Compiles are counted, not timed."""

import numba.core.event as nb_event
import numpy as np

import dispatch_jit as dj
import dispatch_jit.nn.functional as F
from dispatch_jit.compiler.lazy import mode
from dispatch_jit.compiler.lazy.state import state
from dispatch_jit.jit import cache, fingerprint


class _Compiles(nb_event.Listener):
    """Numba compiles started (every njit, generated or not, whatever cache asked for it)."""

    n = 0

    def on_start(self, event):
        self.n += 1

    def on_end(self, event):
        pass


def _model():
    rng = np.random.default_rng(0)
    w1 = dj.nn.Parameter(dj.tensor(rng.standard_normal((8, 6)).astype(np.float32) * 0.3))
    w2 = dj.nn.Parameter(dj.tensor(rng.standard_normal((3, 8)).astype(np.float32) * 0.3))
    g = dj.nn.Parameter(dj.tensor(np.ones(8, np.float32)))
    b = dj.nn.Parameter(dj.tensor(np.zeros(8, np.float32)))
    return [w1, w2, g, b], dj.tensor(rng.standard_normal((5, 6)).astype(np.float32)), dj.tensor(np.array([0, 2, 1, 1, 0]))


def _step(params, opt, x, y):
    w1, w2, g, b = params
    opt.zero_grad()
    h = F.layer_norm(dj.matmul(x, w1.T), (8,), g, b)
    loss = F.cross_entropy(dj.matmul(F.gelu(h), w2.T), y)
    loss.backward()
    opt.step()
    return loss


def test_a_lazy_training_loop_compiles_nothing_after_its_first_steps_and_stores_its_plan_functions():
    params, x, y = _model()
    opt = dj.optim.AdamW(params, lr=1e-2)
    with mode("compiled"):
        for _ in range(5):         # the first AdamW step eager, then plans, then their plan functions
            _step(params, opt, x, y).item()
    listener = _Compiles()
    before = dict(cache.totals())
    with nb_event.install_listener("numba:compile", listener), mode("compiled"):
        for _ in range(4):
            _step(params, opt, x, y).item()
    after = cache.totals()
    assert listener.n == 0
    assert after["compiled"] == before["compiled"] and after["disk"] == before["disk"]
    functions = [p.function for p in state.plans.values() if p.function is not None]
    assert functions            # the step ran as plan functions (else this test checks nothing)
    for fn in functions:
        defs, body, segments, params_, argtypes, glb = fn.parts
        assert fingerprint.of_source(fn.source, glb) is not None, fn.source
