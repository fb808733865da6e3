"""Pure signals: each takes data and ``now`` and returns a Proposal. No I/O, no clock, no logging."""
