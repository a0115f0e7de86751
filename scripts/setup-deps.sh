#!/usr/bin/env bash
# setup-deps.sh - installs what cinfer needs to build and test on Debian 12, if missing.
# Idempotent: checks each package with dpkg first, and only calls apt-get for the missing ones.
# Usage: scripts/setup-deps.sh [--with-fuzz]
set -euo pipefail

pkgs=(build-essential cmake pkg-config libjansson-dev libpcre2-dev libssl-dev curl ca-certificates python3)
# clang + compiler-rt provide libFuzzer for the fuzz harnesses run by `make test`.
pkgs+=(clang libclang-rt-dev)
# clang-format checks the code style (.clang-format; ctest check_format).
pkgs+=(clang-format)
# libevent: HTTP server (evhttp) and the benchmark's HTTP client; xxhash: KV store checksums;
# python3-venv/-dev: client-test venv and the recipe extension.
pkgs+=(libevent-dev libxxhash-dev python3-venv python3-dev)
pkgs+=(libopenmpi-dev openmpi-bin) # Open MPI: expert parallelism (src/ep, `mpirun -n N cinfer serve --ep`)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "setup-deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
