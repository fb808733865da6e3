"""Kubernetes as the replay and the demo simulate it: the HPA's controller (``hpa``), sync by sync.

Below the replay and the demo that drive it; above the facts it applies (``scaler.hpa``).
"""
