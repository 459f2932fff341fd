"""The OpenAI-compatible policy server that exposes an engine, and the wire shapes it speaks.

- :mod:`~mindforge.policy.server.server` — the embedded server (``mindforge policy serve``,
  ``python -m mindforge.policy.server``) with runtime LoRA adapters, token ids and
  logprobs, over an engine of :mod:`mindforge.policy.engines`;
- :mod:`~mindforge.policy.server.protocol` — the wire shapes the server, the engines and
  the scripted test policy share;
- :mod:`~mindforge.policy.server.runner` — run a server in-process or as a subprocess.

Importing this package imports nothing; no module here imports torch.
"""
