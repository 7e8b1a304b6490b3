"""Model training and export, beside the memories rather than inside them.

* :mod:`deltamem.training.copilot` — the MCMA memory copilot: SFT then DPO on preference
  pairs (MCMA §3.3), and a trained copilot as an LLM client (:func:`load_copilot`; the
  ``mcma`` memory names one with the LLM spec ``copilot:RUN_DIR``);
* :mod:`deltamem.training.gguf_export` — a trained copilot as a GGUF file for llama.cpp;
* :mod:`deltamem.training.hf` — the bundled base model as a Hugging Face folder, and the
  transformers LLM backend.

Needs ``pip install 'deltamem[mcma]'`` (torch, transformers, trl, peft, gguf); nothing here
is imported by ``import deltamem``.
"""
