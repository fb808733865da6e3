"""Renderings of decisions: gRPC for KEDA, dry-run lines, metrics and logs."""
