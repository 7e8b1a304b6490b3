"""Every built-in environment adapter passes the library's conformance check."""

from __future__ import annotations

import shutil

import pytest

from deltamem.testing import check_environment


@pytest.mark.envs
@pytest.mark.slow
def test_textworld_treasure_conforms(tmp_path):
    pytest.importorskip("textworld")
    from deltamem.envs.registry import make_env

    with make_env("textworld:treasure", n_games=2, cache_dir=tmp_path) as env:
        check_environment(env, "seen")


@pytest.mark.envs
@pytest.mark.slow
def test_scienceworld_conforms():
    pytest.importorskip("scienceworld")
    if shutil.which("java") is None:
        pytest.skip("ScienceWorld needs Java")
    from deltamem.envs.registry import make_env

    with make_env("scienceworld") as env:
        check_environment(env, "seen", steps=3)


@pytest.mark.envs
@pytest.mark.slow
def test_household_conforms(tmp_path):
    pytest.importorskip("alfworld")
    from deltamem.envs.registry import make_env

    try:
        env = make_env("household", cache_dir=tmp_path)
    except TypeError:
        env = make_env("household")
    with env:
        check_environment(env, "seen")
