"""Agents that act inside a sandbox: oracle, nop and the model-driven HCP agent."""
