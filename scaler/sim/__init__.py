"""Kubernetes as the replay and the demo simulate it, and the demo's simulated fleet.

The Kubernetes side, simulated: the HPA's controller, sync by sync (``hpa``), and the pods'
lifecycle on a pool of GPUs (``pods``: Pending, starting, Ready, draining, a ReplicaSet's
scale-down order, GPU-seconds), the one model the replay's fleet and the demo's cluster share;
both pure, and above the facts they apply (``scaler.hpa``). The demo's and the tests' stand-ins:
a simulated Deployment on a GPU pool on a real clock (``cluster``), a simulated fleet of any
engine of the registry (``fleet``) and router (``router``) writing their series as the servers
do (``exposition``), and a real local Prometheus process (``prometheus``).

A layer of its own below the replay and the demo that drive it: it imports nothing of the
replay, the sources, the outputs, the service or the command line (a contract in
``pyproject.toml``).
"""
