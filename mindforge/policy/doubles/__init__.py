"""Test doubles of the policy, for tests and offline runs only, never for product runs.

- :mod:`~mindforge.policy.doubles.scripted` — a scripted policy behind the server's API
  (``python -m mindforge.policy.doubles.scripted``);
- :mod:`~mindforge.policy.doubles.tiny` — the locally built tiny random-weight model.
"""
