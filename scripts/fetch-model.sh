#!/usr/bin/env bash
# fetch-model.sh - prints the path of the default model (stories260K.gguf), downloading it when needed.
# Order: $CINFER_SHARED/models (default ../shared, the project's test data), then ~/.cache/cinfer/,
# then a download from Hugging Face (ggml-org/models, tinyllamas/) into ~/.cache/cinfer/.
set -euo pipefail
name=stories260K.gguf
url="https://huggingface.co/ggml-org/models/resolve/main/tinyllamas/$name"
root=$(cd "$(dirname "$0")/.." && pwd)
shared=${CINFER_SHARED:-$root/../shared}
if [ -f "$shared/models/$name" ]; then echo "$shared/models/$name"; exit 0; fi
cache=${XDG_CACHE_HOME:-$HOME/.cache}/cinfer
if [ -f "$cache/$name" ]; then echo "$cache/$name"; exit 0; fi
mkdir -p "$cache"
echo "fetch-model: downloading $name from $url" >&2
if ! curl -fL --progress-bar --connect-timeout 15 -o "$cache/$name.part" "$url"; then
  rm -f "$cache/$name.part"
  echo "fetch-model: cannot download $url (offline?). Put $name in $cache/ or set CINFER_SHARED." >&2
  exit 1
fi
mv "$cache/$name.part" "$cache/$name"
echo "$cache/$name"
