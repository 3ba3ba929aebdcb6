"""The layout of a record, the unit of a pending graph: the flat tuple
``(spec, out vid, *slots)``.

* ``rec[SPEC]``: what the record is, an ``encode.Spec`` (an elementwise or reduction op),
  ``encode._ViewSpec``, ``generic.OpSpec`` or ``update``'s loop spec.  It names what each
  slot holds (a tensor's value id, a runtime scalar, a canonical constant) and builds the
  graph node (``spec.node(rec, scalars)``);
* ``rec[OUT]``: the value id of its output (of the first, where a spec has ``nout`` outputs:
  they are consecutive);
* ``rec[FIRST_SLOT:]``: its operands, in the order the spec gives.

Records are plain tuples (see encode.py for why) and the plan cache's key, so slots hold only
hashable, canonical values.  The generated recorders (specialize.py) write the same layout
as a tuple display, ``(_S, vid, v0, ...)``.
"""

SPEC, OUT, FIRST_SLOT = 0, 1, 2
