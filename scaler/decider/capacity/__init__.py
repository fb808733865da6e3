"""What one Ready replica holds (prefill rate, batch slots, decode slowdown), measured. Pure.

The load signal (``scaler.decider.signals.load``) sizes two resources of a replica, each on one number
per replica that users rarely know and that changes with the model, the GPU, the engine's
settings and the traffic's sequence lengths. Both are measured from what the engines export, at
every refresh that can show them; a configured value is only where they start. ``model`` runs the
steps; each figure is its own module, with its formula and a worked example:

* ``saturation``: whether requests wait for room at a refresh (room, every replica full, a fleet
  that just changed), named once;
* ``prefill``: the prefill rate, from the engine's phase times (vLLM's prefill time, SGLang's
  queue time), else from the TTFT while nobody waits (a lower bound);
* ``slots``: the batch slots, from the KV cache's usage, and the engine's cap where it binds
  first (read only at slot-bound refreshes), or an exported ``max_num_seqs``;
* ``slowdown``, ``itl``: how prefill slows decoding, and the batch the ITL objective allows;
* ``dispatch``: whether the requests' dispatch pools the replicas into one queue (a least-loaded
  router) or leaves each its own (a Kubernetes Service, at random), from how evenly they are loaded;
* ``estimate``: the running averages they are kept in.
"""

from scaler.decider.capacity.model import CapacityModel
from scaler.decider.capacity.saturation import Bound, Saturation

__all__ = ["Bound", "CapacityModel", "Saturation"]
