"""Where deltamem keeps the files it makes from what is installed, on the ground floor so any
layer may use it (the model weights re-quantized and the libraries re-linked by ``llm``, the
TextWorld games compiled by ``envs``)."""

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/deltamem`` (``~/.cache/deltamem`` when unset)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "deltamem"
