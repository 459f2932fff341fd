"""The policy endpoint: an OpenAI-compatible server over transformers + PEFT (or llama.cpp), and test doubles.

- :mod:`mindforge.policy.server` — the embedded server (``mindforge policy serve``) with
  runtime LoRA adapters, token ids and logprobs;
- :mod:`mindforge.policy.models` — one resolver for every ``--model`` value (tiny,
  smollm2, a GGUF file, a model directory, a hub id) and the name it is served under;
- :mod:`mindforge.policy.gguf` — a GGUF file dequantised once into a cached plain
  Hugging Face directory;
- :mod:`mindforge.policy.engine` — the transformers + PEFT engine: concurrent requests
  batched (:mod:`~mindforge.policy.batcher`, :mod:`~mindforge.policy.batch_generate`),
  reply KV states reused by the next turn (:mod:`~mindforge.policy.prefix_cache`);
- :mod:`mindforge.policy.llamacpp_engine` — the optional inference-only llama.cpp engine
  on a GGUF model, PEFT adapters converted by :mod:`~mindforge.policy.gguf_lora`;
- :mod:`mindforge.policy.completion` — templating, context check and reply shared by both;
- :mod:`mindforge.policy.tiny` — the locally built tiny model for tests and offline runs;
- :mod:`mindforge.policy.scripted` — a scripted policy behind the same API, for tests only;
- :mod:`mindforge.policy.runner` — run either in-process or as a subprocess;
- :mod:`mindforge.policy.protocol` — the wire shapes both share.

Nothing here imports torch, transformers, peft or llama_cpp at import time except the
engine modules (and the batching and prefix-cache helpers they use), which the server
loads only when it loads a model.
"""
