"""The policy engines: the weights a policy runs on, and the engines that generate with them.

- :mod:`~mindforge.policy.engines.models` — one resolver for every ``--model`` value
  (tiny, smollm2, a GGUF file, a model directory, a hub id) and the name it is served
  under;
- :mod:`~mindforge.policy.engines.gguf` — a GGUF file dequantised once into a cached
  plain Hugging Face directory (built atomically by :mod:`~mindforge.policy.engines.build_once`);
- :mod:`~mindforge.policy.engines.engine` — the transformers + PEFT engine: concurrent
  requests batched (:mod:`~mindforge.policy.engines.batcher`,
  :mod:`~mindforge.policy.engines.batch_generate`), reply KV states reused by the next
  turn (:mod:`~mindforge.policy.engines.prefix_cache`);
- :mod:`~mindforge.policy.engines.llamacpp_engine` — the optional inference-only
  llama.cpp engine on a GGUF model, PEFT adapters converted by
  :mod:`~mindforge.policy.engines.gguf_lora`;
- :mod:`~mindforge.policy.engines.completion` — templating, context check and reply
  shared by both engines.

Importing this package imports nothing; the engine modules (and the batching and
prefix-cache helpers they use) import torch, transformers, peft or llama_cpp at the top,
so the server loads them only when it loads a model.
"""
