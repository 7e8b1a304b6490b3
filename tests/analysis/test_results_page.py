"""The results page's provenance of the acting model (the rest is covered through sweeps)."""

from __future__ import annotations

import json
from pathlib import Path

from deltamem.analysis.results_page import _model_settings


def test_model_settings_come_from_versions_then_from_the_llm_cache(tmp_path: Path) -> None:
    assert _model_settings(tmp_path) is None  # nothing recorded
    (tmp_path / "llm-cache.jsonl").write_text(
        json.dumps({"key": "k:0", "model": "local:SmolLM2-135M-Instruct@q8_0"}) + "\n")
    assert _model_settings(tmp_path) == "`local:SmolLM2-135M-Instruct@q8_0`"
    sessions = [{"session": 0, "llm": None},
                {"session": 1, "llm": {"name": "local:m@q8_0", "flash_attn": False,
                                       "n_ubatch": None, "n_ctx": 4096}}]
    (tmp_path / "versions.json").write_text(json.dumps(sessions))
    assert _model_settings(tmp_path) == "`local:m@q8_0` (flash_attn false)"
