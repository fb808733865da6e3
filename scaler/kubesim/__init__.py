"""Kubernetes as the replay and the demo simulate it: the HPA's controller, sync by sync (``hpa``), and
the pods' lifecycle on a pool of GPUs (``pods``: Pending, starting, Ready, draining, a ReplicaSet's
scale-down order, GPU-seconds).

Below the replay and the demo that drive it; above the facts it applies (``scaler.hpa``).
"""
