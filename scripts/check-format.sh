#!/usr/bin/env bash
# check-format.sh [SRC_DIR] - every tracked C source follows .clang-format (clang-format 14, Debian 12's):
# lists the files that would change and fails. Generated tables (unicode_tables.c, grapheme_tables.c) are exempt.
# Fix with: clang-format -i FILE. A missing clang-format fails under CI=true and skips (77) elsewhere.
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/..}" && pwd)
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not found (scripts/setup-deps.sh installs it)" >&2
  case "${CI:-}" in true|1) exit 1 ;; *) exit 77 ;; esac
fi
cd "$root" || exit 1
bad=0
while IFS= read -r f; do
  case "$f" in *unicode_tables.c | *grapheme_tables.c) continue ;; esac
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then echo "check-format: $f is not formatted"; bad=1; fi
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find src include tools tests bench python -name '*.[ch]')
[ $bad -eq 0 ] && echo "check-format: every C source follows .clang-format"
exit $bad
