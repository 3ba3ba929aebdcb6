"""Tracing: running the user's function on symbolic tensors into a graph (``fallback``, ``symbolic``,
``shaped``), and what the graph's cache entry depends on besides its arguments (``argkey``, ``guards``,
``owners``, ``structure``, ``recompiles``)."""
