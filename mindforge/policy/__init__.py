"""The policy endpoint: an OpenAI-compatible server over transformers + PEFT, and test doubles.

- :mod:`mindforge.policy.server` — the embedded server (``mindforge policy serve``) with
  runtime LoRA adapters, token ids and logprobs;
- :mod:`mindforge.policy.models` — one resolver for every ``--model`` value (tiny,
  smollm2, a GGUF file, a model directory, a hub id) and the name it is served under;
- :mod:`mindforge.policy.gguf` — a GGUF file dequantised once into a cached plain
  Hugging Face directory;
- :mod:`mindforge.policy.tiny` — the locally built tiny model for tests and offline runs;
- :mod:`mindforge.policy.scripted` — a scripted policy behind the same API, for tests only;
- :mod:`mindforge.policy.runner` — run either in-process or as a subprocess;
- :mod:`mindforge.policy.protocol` — the wire shapes both share.

Nothing here imports torch, transformers or peft at import time except
:mod:`mindforge.policy.engine`, which the server loads only when it loads a model.
"""
