"""Temporal workflow definitions (deterministic; no I/O). One workflow per file."""
