"""The decider: a pure function of a target spec, its observations and their instants (see below)."""
