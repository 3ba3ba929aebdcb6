"""A whole training step compiled as one plan: forward, ``backward()`` and the optimizer's update
(``functionalize`` traces it, ``driver`` runs the trace, ``whole_step`` caches and runs the plan)."""
