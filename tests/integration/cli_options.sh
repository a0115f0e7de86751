#!/bin/bash
# cli_options.sh - the option tables of every `cinfer` command, through the binary:
# --opt=V / --opt V / -nV / -n V forms, an unknown option named with a suggestion (exit 2),
# bad values (exit 2), --help of every (sub)command exits 0 and lists every flag the command
# had, the top-level help documents the exit codes; `cinfer run` warnings (-n cut short by
# the context, --ctx beyond the trained context).
set -u
BIN=${CINFER_BIN:?CINFER_BIN not set}
SHARED=${CINFER_SHARED:-$(dirname "$0")/../../../shared}
M=$SHARED/models/stories260K.gguf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
check() { # name, expected, actual
    if [ "$2" != "$3" ]; then echo "FAIL $1: expected [$2] got [$3]"; fail=1; else echo "ok   $1"; fi
}
contains() { # name, needle, haystack
    case "$3" in *"$2"*) echo "ok   $1" ;; *) echo "FAIL $1: [$2] not in [$3]"; fail=1 ;; esac
}

# value forms: all four give the same tokens
run() { "$BIN" run -m "$M" -p "Once upon a time" --temp 0 --no-echo --ignore-eos "$@" 2>"$T/err"; }
a=$(run -n 5); b=$(run -n5); c=$(run --n-predict=5); d=$(run --n-predict 5)
check form-n5 "$a" "$b"; check form-eq "$a" "$c"; check form-space "$a" "$d"
contains generated-5 "generated 5 tokens" "$(cat "$T/err")"
check positional-mixed "$a" "$("$BIN" run -p "Once upon a time" -n5 --temp=0 --no-echo --ignore-eos -m "$M" 2>/dev/null)"

# unknown options and bad values: one line, exit 2
out=$("$BIN" serve "$M" --prot 8080 2>&1); rc=$?
check unknown-rc 2 $rc
check unknown-msg "cinfer serve: unknown option --prot; did you mean --port?" "$out"
out=$("$BIN" run -m "$M" --tmep=0.5 2>&1); rc=$?
check unknown-eq-rc 2 $rc
check unknown-eq-msg "cinfer run: unknown option --tmep; did you mean --temp?" "$out"
out=$("$BIN" serve "$M" --frobnicate 2>&1); rc=$?
check unknown-far-rc 2 $rc
check unknown-far-lines 1 "$(printf '%s\n' "$out" | wc -l)"
out=$("$BIN" serve "$M" --port=abc 2>&1); rc=$?
check bad-port-rc 2 $rc
contains bad-port-msg "--port expects an integer" "$out"
"$BIN" run -m "$M" -n >/dev/null 2>&1; check missing-value-rc 2 $?
"$BIN" run >/dev/null 2>&1; check missing-model-rc 2 $?
"$BIN" run -m "$SHARED/nope.gguf" >/dev/null 2>&1; check runtime-error-rc 1 $?
"$BIN" nosuchcommand >/dev/null 2>&1; check unknown-command-rc 2 $?
"$BIN" >/dev/null 2>&1; check no-command-rc 2 $?
"$BIN" store frob >/dev/null 2>&1; check store-sub-rc 2 $?
"$BIN" bench frob >/dev/null 2>&1; check bench-sub-rc 2 $?
"$BIN" --version >/dev/null; check version-rc 0 $?

# --help: exit 0, every flag listed
help_has() { # cmd words..., then "--" and the flags
    local cmd=() flags=()
    while [ "$1" != "--" ]; do cmd+=("$1"); shift; done
    shift
    local out
    out=$("$BIN" "${cmd[@]}" --help 2>&1); local rc=$?
    check "help-rc ${cmd[*]}" 0 $rc
    local missing=""
    for f in "$@" --help; do
        printf '%s\n' "$out" | grep -q -- "$f\b" || missing="$missing $f"
    done
    check "help-flags ${cmd[*]}" "" "$missing"
}
help_has -- --log-level --version
help_has run -- --model -m --prompt -p --file -f --n-predict -n --ctx -c --batch -b --threads -t --temp --top-k \
    --top-p --min-p --repeat-penalty --presence-penalty --frequency-penalty --seed --ignore-eos --no-echo
help_has serve -- --model --host --port --api-key --api-key-class --served-model-name --ctx --max-seqs \
    --max-batch-tokens --kv-memory --swa-state-memory --swa-state-ttl --swa-replay --swa-replay-tokens --kv-store --kv-store-quota --kv-store-sync --retention --threads --max-queue \
    --max-n --max-body-bytes --conn-buffer-bytes --shutdown-timeout --log-level --tool-call-parser \
    --reasoning-parser --reasoning-budget-default --response-store-max --response-store-bytes --response-store-ttl
help_has tokenize -- --model --ids --pieces --no-bos --parse-special
help_has convert --
help_has quantize --
help_has mkmodel -- --arch --dim --layers --heads --kv-heads --ffn --vocab-from --dtype --seed --ctx --tied \
    --q-lora --kv-lora --qk-nope --qk-rope --v-head --experts --experts-used --expert-ffn --shared-experts \
    --dense-layers --groups --groups-used --gating --expert-scale --yarn-factor --yarn-orig-ctx \
    --head-dim --o-groups --o-lora --window --ratios --index-heads --index-dim --index-topk --hc --sinkhorn \
    --hash-layers --mtp-layers --swiglu-limit --compress-rope-base
help_has store --
help_has store gc -- --quota --now
help_has store stats -- --now
help_has store verify -- --now
help_has bench --
help_has bench latency -- --model --prompt --gen --threads --reps --bw-mib
help_has bench replay -- --model --lengths --windows --prompts --seed --threads
help_has bench throughput -- --model --requests --input-len --output-len --prefix-len --threads --kv-memory \
    --max-batch-tokens --max-seqs --sync-scheduling
help_has bench serve -- --base-url --api --model --api-key --workload --concurrency --rate --requests --duration \
    --seed --out --timeout --progress --no-progress --output-len --max-output-len --ignore-eos --temperature \
    --input-len --len-dist --sessions --turns --system-len --user-len --tool-len --think-time --trace \
    --block-scale --time-scale --max-requests --min-turns --conversations --max-context --think-min --think-max \
    --token-range --text --dry-run --dump
help_has bench report -- --svg
help_has bench trace-stats -- --block-scale --max-requests
top=$("$BIN" --help)
contains help-exit-1 "1 runtime error" "$top"
contains help-exit-2 "2 usage error" "$top"

# cinfer run warnings
"$BIN" run -m "$M" -p "Once upon a time" -n 500 --temp 0 >/dev/null 2>"$T/err"
contains warn-n "warning: -n 500 is cut short by the context" "$(cat "$T/err")"
"$BIN" run -m "$M" -p "Once" -n 2 --ctx 1024 --temp 0 >/dev/null 2>"$T/err"
contains warn-ctx "warning: --ctx 1024 exceeds the model's trained context of 128 tokens" "$(cat "$T/err")"
"$BIN" run -m "$M" -p "Once" -n 2 --temp 0 >/dev/null 2>"$T/err"
check no-warning "" "$(grep warning "$T/err")"
exit $fail
