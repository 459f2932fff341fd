"""Projecting a generation at scale from measured per-stage costs.

- :mod:`~mindforge.scale.costs` - one trial's measured cost, read from plain records, and
  its split into sandbox, tool and model time (token rates fitted to the measured trials);
- :mod:`~mindforge.scale.plan` - a generation as steps behind barriers (trial waves,
  sandbox-only waves, training, serial orchestration), read from a measured timeline or
  scaled to a target size, and the cluster it runs on;
- :mod:`~mindforge.scale.simulate` - a seeded discrete-event simulation (SimPy) of one
  plan on one cluster: trials queued onto sandbox slots, model calls onto policy-server
  lanes, training onto the training node.

Pure: no Temporal, Ray or store imports; the benchmark (``benchmarks/bench_scale.py``)
reads the store and measures Ray's dispatch overhead.
"""

from __future__ import annotations
