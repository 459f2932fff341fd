"""MindForge: recursive self-improvement orchestration for LLM agents.

The core package is importable without Temporal or Ray: domain models, task loading,
sandboxes, the agent loop, verification, audit, search, training and the store.
"""

__version__ = "0.1.0"
