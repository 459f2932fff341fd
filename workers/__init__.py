"""Temporal worker entrypoints and activity implementations; activities fan trials out to Ray."""
