"""Trials: one attempt of one task under one pair, from build to verifier, and its record.

- :mod:`~mindforge.trials.record` - the trial record (:class:`TrialRecord`), failure
  classes, the limit that fired, phase timings;
- :mod:`~mindforge.trials.run` - run one trial end to end in a sandbox;
- :mod:`~mindforge.trials.verify` - the verifier phase and reward parsing;
- :mod:`~mindforge.trials.batch` - run many trials in-process (``mindforge eval``).
"""
