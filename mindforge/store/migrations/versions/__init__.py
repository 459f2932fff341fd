"""Alembic revision scripts, oldest first by ``down_revision``."""
