"""Long fuzz runs that collect every distinct mismatch instead of stopping at the first.

    python tests/fuzz/longrun.py --seed 12 --graphs 3000 [--modes compile,lazy] [--out DIR]

Graph i is generated from ``random.Random(seed * 1_000_003 + i)``, so a run is reproducible from its seed
and one graph from its number (``--only I``).  Each mismatch is classified by its key (what failed, in which
mode, for which op); the first graph of each class is reduced (nodes that the failing value does not depend
on are dropped) and its reproducer written to ``DIR/<n>.py``, with a summary in ``DIR/summary.txt``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if "DISPATCH_JIT_CACHE_DIR" not in os.environ:
    os.environ["DISPATCH_JIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dispatch_jit_fuzz_cache_")

import fuzz_check as fc  # noqa: E402
import fuzz_graph as fg  # noqa: E402


def ancestors(g, v):
    k = len(g.inputs)
    need = {v}
    for i in range(len(g.nodes) - 1, -1, -1):
        if k + i in need:
            for a in g.nodes[i].args:
                if a is not None and a[0] == "v":
                    need.add(a[1])
    return need


def reduce_graph(g, check, key):
    """Drop nodes one at a time (rewiring nothing: only nodes no later node reads) while the same
    mismatch class still fails."""
    changed = True
    while changed and len(g.nodes) > 1:
        changed = False
        for i in range(len(g.nodes) - 1, -1, -1):
            v = len(g.inputs) + i
            if any(a is not None and a[0] == "v" and a[1] == v for n in g.nodes[i + 1:] for a in n.args):
                continue
            if v in g.outputs and len(g.outputs) == 1:
                continue
            def shift(a):
                return a if a is None or a[0] != "v" or a[1] < v else ("v", a[1] - 1)
            nodes = [n if j < i else fg.Node(n.op, [shift(a) for a in n.args], n.params, n.form)
                     for j, n in enumerate(g.nodes) if j != i]
            cand = fg.Graph(g.inputs, nodes, [o - (o > v) for o in g.outputs if o != v],
                            g.expect_error if i != len(g.nodes) - 1 else None, g.exact[:v] + g.exact[v + 1:],
                            g.reordered[:v] + g.reordered[v + 1:])
            if not cand.outputs:
                continue
            try:
                check(cand)
            except fc.Mismatch as e:
                if e.key == key:
                    g, changed = cand, True
                    break
            except Exception:      # noqa: BLE001
                pass
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--graphs", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--modes", default="compile,lazy")
    ap.add_argument("--max-nodes", type=int, default=5)
    ap.add_argument("--only", type=int, default=None)
    ap.add_argument("--out", default="fuzz_findings")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    modes = tuple(m for m in args.modes.split(",") if m)
    os.makedirs(args.out, exist_ok=True)
    classes = {}
    counts = {}
    t0 = time.time()
    rng_ids = [args.only] if args.only is not None else range(args.start, args.start + args.graphs)

    def check(g):
        fc.check_graph(g, modes=modes, use_torch=not args.no_torch)

    for i in rng_ids:
        try:
            g = fg.gen_graph(fg.RandomChooser(args.seed * 1_000_003 + i), max_nodes=args.max_nodes)
            check(g)
        except fc.Mismatch as e:
            key = e.key
            counts[key] = counts.get(key, 0) + 1
            if key not in classes:
                small = reduce_graph(g, check, key)
                try:
                    check(small)
                    msg = str(e)
                except fc.Mismatch as e2:
                    msg = str(e2)
                n = len(classes)
                classes[key] = (i, n)
                with open(os.path.join(args.out, f"{n:03d}.py"), "w") as fh:
                    fh.write(f"# class {key!r}, graph {i} (seed {args.seed})\n" +
                             "\n".join("# " + ln for ln in msg.split("\n----- standalone reproducer -----")[0]
                                       .splitlines()) + "\n" + msg.split("----- standalone reproducer -----\n")[-1])
                print(f"[{i}] NEW {key}: {str(e).splitlines()[0][:200]}", flush=True)
        except Exception:     # noqa: BLE001 - a crash of the harness itself
            key = ("harness", traceback.format_exc().splitlines()[-1][:120])
            counts[key] = counts.get(key, 0) + 1
            if key not in classes:
                classes[key] = (i, len(classes))
                print(f"[{i}] HARNESS {traceback.format_exc()}", flush=True)
        if (i + 1) % 50 == 0:
            print(f"... {i + 1} graphs, {len(classes)} classes, {time.time() - t0:.0f} s", flush=True)
    with open(os.path.join(args.out, "summary.txt"), "w") as fh:
        fh.write(f"seed {args.seed}, graphs {args.start}..{args.start + args.graphs}, modes {modes}, "
                 f"{time.time() - t0:.0f} s\n")
        for key, (i, n) in sorted(classes.items(), key=lambda kv: kv[1][1]):
            fh.write(f"{n:03d} {counts[key]:5d}x first graph {i}: {key!r}\n")
    print(open(os.path.join(args.out, "summary.txt")).read())


if __name__ == "__main__":
    main()
