"""Generated code for one differentiable call signature: its recorder and its node's backward.

The Autograd kernel (kernel.py) specializes once per call signature, and the
signature fixes which tensor inputs require grad and their dtypes.  Both ends
of a recorded op are then written as straight-line Python for exactly that
case, as PyTorch's codegen writes one C++ ``VariableType`` function and one
``Node`` subclass per op:

* ``recorder``: runs the op below autograd and records one node: its edges,
  what it saves (only what the gradients of the inputs that require grad
  read), its ctx; no loops over arguments, no keyword parsing, no ``needs``
  tests at run time.
* ``node_apply``: the ``apply`` of that signature's Node class: unpacks the
  saved tensors, calls the derivative row's formulas for the inputs that need
  a gradient, sums a gradient back over broadcast dimensions only when its
  shape differs, casts only when its dtype differs.

Both do what the generic paths do (kernel.AutogradKernel's ``run``,
``Node.apply`` with kernel.make_formula), which stay for list inputs and nodes
made elsewhere; tests/autograd compares the two.
"""

from __future__ import annotations

import types

from ..jit.source import define
from ..signature import DTYPE_MASK, DTYPE_SHIFT
from ..tensor import Tensor as _T
from .graph import SavedTensor, _output_data, edge_of, freed_error

__all__ = ["recorder", "node_apply", "NOSAVED"]

# nothing to save (add, sub, neg, ...): every such node shares one empty, read-only mapping
NOSAVED = types.MappingProxyType({})


def _exec(lines: list, glb: dict, name: str, filename: str):
    return define("\n".join(lines) + "\n", name, glb, filename)


def recorder(nargs, tensor_pos, out_pos, statics, save_pos, save_result, below, slow, node_cls, opname, needs,
             ag_bits, dense_dtypes, differentiable, pending=None):
    """The recording kernel for one signature.  ``needs[j]``: tensor input ``tensor_pos[j]``
    requires grad; ``save_pos``: (name, position) of each saved input; ``dense_dtypes[j]``: its
    dtype index when it is a dense tensor (a constant of the signature), else None.
    ``pending``: compiled mode's pending tensor class (kernel.AutogradKernel.recorder): ``below``
    returns None where it did not record the call, which ``slow`` then runs; a pending tensor
    is saved as a dense one, its shape read from its pending state, and a pending output is
    saved as its twin (graph._output_data), never computed here."""
    p = [f"p{i}" for i in range(nargs)]
    lines = [f"def run({', '.join(p)}):"]
    if out_pos is not None:
        lines.append(f"    if p{out_pos} is not None:\n        return _slow({', '.join(p)})")
    lines.append(f"    out = _below({', '.join(p)})")
    if pending is not None:
        lines.append(f"    if out is None:\n        return _slow({', '.join(p)})")
    if not any(needs):
        lines.append("    return out")
        return _exec(lines, {"_below": below, "_slow": slow}, "run", f"<dispatch_jit autograd {opname}>")
    lines.append(f"    if (out._sig >> {DTYPE_SHIFT}) & {DTYPE_MASK} not in _DIFF"
                 f"{''.join(f' or out is p{i}' for i in tensor_pos)}:")
    lines.append("        return out")
    edges = []
    for i, need in zip(tensor_pos, needs):
        if need:
            # edge_of, inlined: an interior tensor's (grad_fn, output index), or a leaf's cached edge
            lines.append(f"    f{i} = p{i}.grad_fn")
            lines.append(f"    e{i} = (f{i}, p{i}.__dict__.get('_output_nr', 0)) if f{i} is not None else "
                         f"(p{i}.__dict__.get('_leaf_edge') or _edge(p{i}))")
            edges.append(f"e{i}")
        else:
            edges.append("None")
    for n, i in save_pos:
        # a number passed for a Tensor argument is saved as it is
        lines.append(f"    if p{i}.__class__ is _T{f' or p{i}.__class__ is _P' if pending is not None else ''}:")
        lines += ["    " + line for line in _save_lines(f"s{i}", f"p{i}", n, False)]
        lines.append(f"    else:\n        s{i} = p{i}")
    saved = ", ".join(f"'{n}': s{i}" for n, i in save_pos)
    # a dense tensor's dtype is in its signature (a constant here); other arguments have no shape
    shape = ".shape" if pending is not None else "._data.shape"
    shapes = ", ".join(f"p{i}{shape}" if d is not None else "None" for i, d in zip(tensor_pos, dense_dtypes))
    dtypes = ", ".join(str(d) for d in dense_dtypes)
    ctx = ", ".join([f"'{n}': p{i}" for n, i in statics] + [f"'shapes': ({shapes},)", f"'dtypes': ({dtypes},)"])
    lines += [f"    saved = {{{saved}}}" if saved or save_result else "    saved = _NOSAVED",
              "    node = _new(_Node)",
              f"    node.next_functions = ({', '.join(edges)},)",
              "    node.saved = saved",
              f"    node.ctx = {{{ctx}}}",
              # mark_output, inlined
              "    out.__dict__['requires_grad'] = True",
              "    out.grad_fn = node",
              "    out._sig |= _AG"]
    if save_result:
        # saved after marking the output: the saved output must require grad (and carry the autograd
        # key), or a double backward (create_graph=True) treats it as a constant
        if pending is not None:
            lines.append("    saved['result'] = _Saved(out, True, 'result')")
        else:
            lines += _save_lines("so", "out", "result", True) + ["    saved['result'] = so"]
    lines.append("    return out")
    g = {"_slow": slow, "_below": below, "_T": _T, "_DIFF": differentiable, "_edge": edge_of, "_Saved": SavedTensor,
         "_new": object.__new__, "_outdata": _output_data, "_Node": node_cls, "_AG": ag_bits, "_NOSAVED": NOSAVED, "_P": pending}
    return _exec(lines, g, "run", f"<dispatch_jit autograd {opname}>")


def _save_lines(var: str, src: str, name: str, is_output: bool) -> list:
    """graph.saved_tensor(src, name, is_output) as inline statements binding ``var`` (two calls
    fewer per saved tensor); an output is saved as a tensor of its data and version counter,
    without its grad_fn (graph._output_data)."""
    lines = [f"{var}d = {src}.__dict__",
             f"{var}b = {var}d.get('_vc')",
             f"if {var}b is None:",
             f"    {var}b = {var}d['_vc'] = [0]",
             f"{var} = _new(_Saved)",
             f"{var}.box = {var}b",
             f"{var}.version = {var}b[0]",
             f"{var}.is_output = {is_output}",
             f"{var}.name = {name!r}"]
    if is_output:
        lines += [f"if {src}.__class__ is not _T:",      # a subclass saves its own twin (BatchedTensor)
                  f"    {var}t = _outdata({src}, {var}b)",
                  "else:",
                  f"    {var}t = _new(_T)",
                  f"    {var}t._data = {src}._data",
                  f"    {var}t._sig = {src}._sig",
                  f"    {var}t.__dict__['_vc'] = {var}b",
                  f"    {var}t.__dict__['requires_grad'] = {src}.requires_grad",
                  f"{var}.data_tensor = {var}t"]
    else:
        lines.append(f"{var}.data_tensor = {src}")
    return ["    " + line for line in lines]


def node_apply(backward, unbroadcast: bool, needs, dense_dtypes, saved_names, sum_to, dtype_of, opname):
    """``Node.apply`` for the nodes of one signature.  ``backward``: the derivative row's one
    formula, or its tuple of per-input ``Grad``; ``saved_names``: what the recorder saved."""
    lines = ["def apply(self, grads):",
             "    saved = self.saved",
             "    if saved is None:",
             "        raise _freed(self)"]
    for k, n in enumerate(saved_names):
        # SavedTensor.unpack, inlined for a saved input at its version (the output's re-attaches
        # this node; a modified input's raises)
        lines += [f"    v{k} = saved[{n!r}]",
                  f"    if v{k}.__class__ is _Saved:",
                  f"        v{k} = v{k}.unpack(self)" if n == "result" else
                  f"        v{k} = v{k}.data_tensor if v{k}.box[0] == v{k}.version else v{k}.unpack(self)"]
    s = "{" + ", ".join(f"{n!r}: v{k}" for k, n in enumerate(saved_names)) + "}"
    lines += [f"    s = {s}", "    ctx = self.ctx", "    g = grads[0]"]
    glb = {"_freed": freed_error, "_Saved": SavedTensor, "_sum_to": sum_to}
    per_input = isinstance(backward, tuple)
    if not per_input:
        glb["_bwd"] = backward
        lines += ["    res = _bwd(g, s, ctx)", "    if not isinstance(res, tuple):", "        res = (res,)"]
    results = []
    for j, (need, dti) in enumerate(zip(needs, dense_dtypes)):
        if not need:
            results.append("None")
            continue
        if per_input:
            if j >= len(backward):
                results.append("None")
                continue
            glb[f"_g{j}"] = backward[j].fn
            lines.append(f"    r{j} = _g{j}(g, s, ctx)")
        else:
            # a formula may return fewer gradients than the op has tensor inputs (the rest: None)
            lines.append(f"    r{j} = res[{j}]" + ("" if j == 0 else f" if len(res) > {j} else None"))
        lines.append(f"    if r{j} is not None:")
        if unbroadcast:
            lines += [f"        if r{j}.shape != ctx['shapes'][{j}]:",
                      f"            r{j} = _sum_to(r{j}, ctx['shapes'][{j}])"]
        glb[f"_dt{j}"] = dtype_of(dti)
        lines += [f"        if (r{j}._sig >> {DTYPE_SHIFT}) & {DTYPE_MASK} != {dti}:",
                  f"            r{j} = r{j}.to(_dt{j})"]
        results.append(f"r{j}")
    lines.append(f"    return ({', '.join(results)},)")
    return _exec(lines, glb, "apply", f"<dispatch_jit backward {opname}>")
