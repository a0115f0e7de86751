#!/usr/bin/env bash
# run-server.sh - what `make run` does after the build: starts `cinfer serve` on the default model
# (scripts/fetch-model.sh gives its path) and, before blocking in the server, prints a curl command
# that works against it. CINFER_PORT overrides the port (default 8080), CINFER_BIN the binary
# (default build/cinfer); Ctrl-C stops the server.
# tests/integration/serve_readme.sh runs this script and the curl command it prints.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=$("$root/scripts/fetch-model.sh")
port=${CINFER_PORT:-8080}
name=$(basename "$model" .gguf)
cat <<EOT
cinfer: serving $model as '$name' on http://127.0.0.1:$port (Ctrl-C stops it). Try:
  curl -s http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' -d '{"model": "$name", "messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 64}'
EOT
exec "${CINFER_BIN:-$root/build/cinfer}" serve "$model" --port "$port" --ctx 512
