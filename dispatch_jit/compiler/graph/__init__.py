"""The graph IR and what rewrites it: ``ir``, the passes (``passes``, ``views``), the joint
forward+backward graph (``joint``) and its split into two plans (``partition``)."""
