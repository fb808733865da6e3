"""The simulated serving fleet the replay drives: what a policy's replicas do with the requests.

cluster.py   the fleet: the pod lifecycle (scaler.sim.pods), dispatch, the fluid physics'
             replicas (prefill and decode) and the step physics' pods
stepped.py   the step physics: vLLM's engine step by step on a replica profile
kernel.py    the fluid fleet's requests served between two ticks in one compiled loop (numba, optional)
series.py    what the fleet exports, counted as its servers count it and read as Prometheus reads it
router.py    llm-d's endpoint picker with flow control in front of the fleet
disagg.py    a disaggregated fleet: a prefill pool handing prompts to a decode pool

The fleet sits below the replay's drivers (the loop, the policies, KEDA's triggers, the report,
the command line) and imports none of them: it reads requests (``scaler.replay.trace``, the
layer below it) and is told how many replicas to run; what decides that is above it. The
``layers`` contract on ``scaler.replay`` in pyproject.toml holds it to that.
"""
