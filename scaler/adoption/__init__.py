"""The tools for adopting the scaler and living with it, each a `scaler` command:

* ``convert``: a ScaledObject with plain KEDA triggers rewritten for this scaler, every key
  carried or dropped with its reason (``--replay``: both replayed on the same trace);
* ``doctor``: a cluster read, read-only, for what makes LLM latency bad;
* ``timeline``: one target's decisions over a span, drawn from what Prometheus recorded.

Edges: they read files, clusters and Prometheus, and import the decider only through the
service's wiring and the replay.
"""
