"""The ``mindforge`` command: one Typer sub-app per file."""
