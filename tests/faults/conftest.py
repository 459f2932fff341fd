"""Fault tests reuse the whole-lineage fixtures: a Temporal dev server and a two-node Ray cluster."""

from tests.e2e.conftest import contract_path, ray_cluster, temporal_env  # noqa: F401 - pytest finds fixtures by name here
