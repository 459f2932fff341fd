"""Alembic migrations of the store's schema (run with :func:`mindforge.store.engine.upgrade_db`)."""
