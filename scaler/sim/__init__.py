"""Local stand-ins for the demo and the tests: a real Prometheus process and a simulated vLLM fleet."""
