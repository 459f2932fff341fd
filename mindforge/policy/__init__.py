"""The policy endpoint: an OpenAI-compatible server over transformers + PEFT (or llama.cpp), and test doubles.

One room per kind of thing:

- :mod:`mindforge.policy.engines` — the weights (the ``--model`` resolver, GGUF
  conversion) and the engines that generate with them: transformers + PEFT with batching
  and a prefix cache, and the optional llama.cpp engine;
- :mod:`mindforge.policy.server` — the embedded server that exposes an engine
  (``mindforge policy serve``), its wire shapes, and running it in-process or as a
  subprocess;
- :mod:`mindforge.policy.handoff` — handing an adapter revision to a serving endpoint
  (this server or vLLM);
- :mod:`mindforge.policy.doubles` — the test doubles: the scripted policy and the tiny
  model.

Nothing here imports torch, transformers, peft or llama_cpp at import time except the
engine modules (and the batching and prefix-cache helpers they use), which the server
loads only when it loads a model.
"""
