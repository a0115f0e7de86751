"""structured_cost.py - the throughput cost of structured outputs at 16 streams (issue 17), run by
bench/structured_cost.sh. Not a test.

One server at a time (cinfer serve, then llama.cpp's llama-server as the peer when its binary exists),
the same GGUF model, the same load: 16 client threads each sending chat requests back to back
(non-streaming), temperature 1 with per-request seeds, top-k 40 (top-p and min-p off) on both
servers (with top-k off, llama-server's samplers sort the whole 32k vocabulary per token and ran at
under 1 token/s per stream on this machine), max_tokens N, in these modes:
  free        no constraint (ignore_eos: every request runs to max_tokens)
  json_schema response_format json_schema: {"rows": [small objects]} (documents end when the model
              closes the array: fewer tokens per request than free)
  json_object response_format json_object (the peer: json_schema {"type": "object"})
  json_long   the same with minItems 64, so every document is cut by max_tokens (equal token counts
              with free) - cinfer only: llama.cpp's GBNF expands the 64 repetitions and its grammar
              sampler over the whole 32k vocabulary then ran at well under 1 token/s per stream here
  regex       guided_regex, groups of digits and letters (cinfer only: llama-server takes no regex)
The modes run interleaved, ROUNDS rounds of every mode (the peer: PEER_ROUNDS), REQUESTS requests
each; reported per mode:
the median round's output tokens/s and its ratio to `free` on the same server, and for cinfer the engine's grammar counters (/metrics): mask time per constrained
token, forced tokens, masks computed while a forward pass ran. Ratios from one run are the result;
absolute numbers move with the shared machine's load.
usage: structured_cost.py CINFER_BIN LLAMA_SERVER_BIN|- MODEL THREADS REQUESTS MAX_TOKENS"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

STREAMS = 16
ROUNDS = 3
PEER_ROUNDS = 1  # llama-server ran at ~10 tokens/s here (its threads spin on the loaded VM): one round
ROW = {"type": "object", "additionalProperties": False, "required": ["id", "name", "ok"],
       "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                      "name": {"type": "string", "maxLength": 12}, "ok": {"type": "boolean"}}}
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["rows"],
          "properties": {"rows": {"type": "array", "items": ROW}}}
LONG_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["rows"],
               "properties": {"rows": {"type": "array", "minItems": 64, "items": ROW}}}
REGEX = "([0-9]{3}-[a-z]{4} ){200}"


def body(mode, peer, seed, max_tokens):
    b = {"messages": [{"role": "user", "content": "Write rows of data (%d)." % seed}],
         "max_tokens": max_tokens, "temperature": 1, "seed": seed, "top_k": 40, "top_p": 1.0, "min_p": 0.0}
    if mode == "free":
        b["ignore_eos"] = True
    elif mode in ("json_schema", "json_long"):
        b["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "rows", "schema": SCHEMA if mode == "json_schema" else LONG_SCHEMA}}
    elif mode == "json_object":
        b["response_format"] = {"type": "json_object"}
    elif mode == "regex":
        b["guided_regex"] = REGEX
    return b


def peer_body(b):
    """The same request for llama-server's native /completion endpoint: its chat endpoint refuses
    response_format on this template-less model ("Failed to initialize samplers"), so the prompt is
    the ChatML text cinfer renders and the constraint its json_schema field."""
    p = {"prompt": "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n" % b["messages"][0]["content"],
         "n_predict": b["max_tokens"]}
    for k in ("temperature", "seed", "top_k", "top_p", "min_p", "ignore_eos"):
        if k in b:
            p[k] = b[k]
    rf = b.get("response_format")
    if rf:
        p["json_schema"] = rf["json_schema"]["schema"] if rf["type"] == "json_schema" else {"type": "object"}
    return p


def post(url, b, peer, timeout=1800):
    path, data = ("/completion", peer_body(b)) if peer else ("/v1/chat/completions", b)
    req = urllib.request.Request(url + path, data=json.dumps(data).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    if peer:  # the chat shape the caller reads
        fin = "length" if out.get("stop_type") == "limit" else "stop"
        return {"choices": [{"finish_reason": fin}], "usage": {"completion_tokens": out["tokens_predicted"]}}
    return out


def metrics(url):
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r"(cinfer_grammar_\w+)(?:\{[^}]*\})? (\S+)", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def run_mode(url, mode, peer, n_requests, max_tokens):
    lock = threading.Lock()
    state = {"next": 0, "tokens": 0, "errors": 0, "finish": {}}

    def worker():
        while True:
            with lock:
                i = state["next"]
                if i >= n_requests:
                    return
                state["next"] += 1
            try:
                r = post(url, body(mode, peer, 1000 + i, max_tokens), peer)
                fin = r["choices"][0]["finish_reason"]
                with lock:
                    state["tokens"] += r["usage"]["completion_tokens"]
                    state["finish"][fin] = state["finish"].get(fin, 0) + 1
            except Exception as e:  # counted and shown: a failed mode is visible, never silent
                with lock:
                    state["errors"] += 1
                    state["last_error"] = str(e)[:200]

    before = metrics(url)
    t0 = time.time()
    ts = [threading.Thread(target=worker) for _ in range(STREAMS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.time() - t0
    after = metrics(url)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return wall, state, delta


def start(cmd, ready_url, log):
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(600):
        try:
            urllib.request.urlopen(ready_url, timeout=1)
            return p
        except Exception:
            if p.poll() is not None:
                raise RuntimeError("server exited: " + " ".join(cmd))
            time.sleep(0.2)
    p.kill()
    raise RuntimeError("server did not start: " + " ".join(cmd))


def stop(p):
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def bench(name, url, modes, n_requests, max_tokens, peer, rounds):
    """ROUNDS rounds, each running every mode once (interleaved, so load drift on the shared machine
    hits every mode alike); per mode the median round's throughput and its ratio to `free`."""
    run_mode(url, "free", peer, STREAMS, 8)  # warm-up (threads, caches)
    runs = {m: [] for m in modes}
    for _ in range(rounds):
        for mode in modes:
            runs[mode].append(run_mode(url, mode, peer, n_requests, max_tokens))
    med = {}
    for mode in modes:
        tps = sorted(st["tokens"] / wall if wall > 0 else 0 for wall, st, _ in runs[mode])
        med[mode] = tps[len(tps) // 2]
    rows = []
    for mode in modes:
        n_req = sum(sum(st["finish"].values()) for _, st, _ in runs[mode])
        tokens = sum(st["tokens"] for _, st, _ in runs[mode])
        wall = sum(w for w, _, _ in runs[mode])
        finish, errors, d = {}, 0, {}
        for _, st, dd in runs[mode]:
            for k, v in st["finish"].items():
                finish[k] = finish.get(k, 0) + v
            errors += st["errors"]
            for k, v in dd.items():
                d[k] = d.get(k, 0) + v
        extra = ""
        if d.get("cinfer_grammar_tokens_total"):
            g = d["cinfer_grammar_tokens_total"]
            extra = "mask %.1f us/token, forced %.1f%%, overlapped %.1f%%" % (
                1e6 * d.get("cinfer_grammar_mask_seconds_total", 0) / g,
                100 * d.get("cinfer_grammar_forced_tokens_total", 0) / g,
                100 * d.get("cinfer_grammar_masks_overlapped_total", 0) / g)
        err = " errors %d" % errors if errors else ""
        rounds = " ".join("%.0f" % (st["tokens"] / w if w > 0 else 0) for w, st, _ in runs[mode])
        rows.append("%-7s %-12s %6d tok (%5.1f/req) %6.1f s  median %7.1f tok/s (rounds %s)  x%.3f of free  finish %s  %s%s" % (
            name, mode, tokens, tokens / n_req if n_req else 0, wall, med[mode], rounds, med[mode] / med["free"] if med.get("free") else 0,
            json.dumps(finish), extra, err))
        print(rows[-1], flush=True)
    return rows


def main():
    cinfer, llama, model, threads, n_requests, max_tokens = sys.argv[1:7]
    n_requests, max_tokens = int(n_requests), int(max_tokens)
    log = open(os.devnull, "w")
    port = 18000 + os.getpid() % 1000
    url = "http://127.0.0.1:%d" % port
    p = start([cinfer, "serve", model, "--port", str(port), "-t", threads, "--ctx", "4096", "--max-seqs",
               str(STREAMS), "--kv-memory", "1"], url + "/health", log)
    try:
        bench("cinfer", url, ["free", "json_schema", "json_object", "json_long", "regex"], n_requests, max_tokens,
              False, ROUNDS)
    finally:
        stop(p)
    if llama != "-" and os.path.exists(llama):
        p = start([llama, "-m", model, "--port", str(port), "-t", threads, "-c", str(4096 * STREAMS), "-np",
                   str(STREAMS), "--no-warmup"], url + "/health", log)
        try:
            bench("llama", url, ["free", "json_schema", "json_object"], n_requests, max_tokens, True, PEER_ROUNDS)
        finally:
            stop(p)
    else:
        print("llama    (peer not run: no llama-server binary at %s)" % llama)


if __name__ == "__main__":
    main()
