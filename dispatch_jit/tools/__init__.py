"""The tools built on the library, the top layer: the command line (``dispatch-jit``,
``python -m dispatch_jit``) with its demo, operator listing and the eager-versus-compiled
tradeoff report.  They use the package as a user does (``import dispatch_jit``); nothing in
the library imports them."""
