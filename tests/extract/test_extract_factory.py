import pytest

from deltamem.errors import ConfigError
from deltamem.extract import LLMExtractor
from deltamem.extract.factory import make_extractor


def test_structural_is_the_memory_default():
    assert make_extractor("structural") == (None, None)


def test_llm_extractor_runs_over_the_named_llm():
    ext, client = make_extractor("llm", "scripted")
    assert isinstance(ext, LLMExtractor) and client is not None


@pytest.mark.parametrize(("name", "llm", "says"), [
    ("llm", None, "--llm"),
    ("magic", None, "unknown extractor 'magic'"),
])
def test_bad_choices_are_config_errors_naming_the_flag(name, llm, says):
    with pytest.raises(ConfigError, match=says):
        make_extractor(name, llm)
