"""I/O only: Prometheus and Kubernetes readers that return values or a typed absence."""
