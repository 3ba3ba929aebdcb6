"""Running an optimized graph: the plan and its steps (``plan``, ``steps``), the plan as one compiled
function (``function``, ``call_rules``) and where its time goes (``profile``), the one-loop fast path (``fastpath``) and what a compiled
function's cache holds per call signature (``cached``)."""
