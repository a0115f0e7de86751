"""structured_cost.py - the throughput cost of structured outputs at 16 streams (issue 17), run by
bench/structured_cost.sh. Not a test.

One server at a time (cinfer serve, then llama.cpp's llama-server as the peer when its binary exists),
the same GGUF model, the same load: 16 client threads each sending chat requests back to back
(non-streaming), temperature 1 with per-request seeds, max_tokens N, in four modes:
  free        no constraint (ignore_eos: every request runs to max_tokens)
  json_schema response_format json_schema: an array of at least 64 small objects, so every document
              is cut by max_tokens too (equal token counts in every mode)
  json_object response_format json_object (the peer: its json_object mode)
  regex       guided_regex / the peer's GBNF equivalent: digits and letters in groups (cinfer only:
              llama-server takes no regex; reported for cinfer)
Reported per mode: output tokens/s over the wall time of the mode and its ratio to `free` on the
same server, and for cinfer the engine's grammar counters (/metrics): mask time per constrained
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
SCHEMA = {"type": "object", "additionalProperties": False, "required": ["rows"],
          "properties": {"rows": {"type": "array", "minItems": 64, "items": {
              "type": "object", "additionalProperties": False, "required": ["id", "name", "ok"],
              "properties": {"id": {"type": "integer", "minimum": 0, "maximum": 999},
                             "name": {"type": "string", "maxLength": 12}, "ok": {"type": "boolean"}}}}}}
REGEX = "([0-9]{3}-[a-z]{4} ){200}"


def body(mode, peer, seed, max_tokens):
    b = {"messages": [{"role": "user", "content": "Write rows of data (%d)." % seed}],
         "max_tokens": max_tokens, "temperature": 1, "seed": seed}
    if mode == "free":
        b["ignore_eos"] = True
    elif mode == "json_schema":
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "rows", "schema": SCHEMA}}
    elif mode == "json_object":
        b["response_format"] = {"type": "json_object"}
    elif mode == "regex":
        b["guided_regex"] = REGEX
    return b


def post(url, b, timeout=600):
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(b).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


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
                r = post(url, body(mode, peer, 1000 + i, max_tokens))
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


def bench(name, url, modes, n_requests, max_tokens, peer):
    rows, free_tps = [], None
    run_mode(url, "free", peer, STREAMS, 8)  # warm-up (threads, caches)
    for mode in modes:
        wall, st, d = run_mode(url, mode, peer, n_requests, max_tokens)
        tps = st["tokens"] / wall if wall > 0 else 0
        if mode == "free":
            free_tps = tps
        extra = ""
        if d.get("cinfer_grammar_tokens_total"):
            g = d["cinfer_grammar_tokens_total"]
            extra = "mask %.1f us/token, forced %.1f%%, overlapped %.1f%%" % (
                1e6 * d.get("cinfer_grammar_mask_seconds_total", 0) / g,
                100 * d.get("cinfer_grammar_forced_tokens_total", 0) / g,
                100 * d.get("cinfer_grammar_masks_overlapped_total", 0) / g)
        err = " errors %d (%s)" % (st["errors"], st.get("last_error", "")) if st["errors"] else ""
        rows.append("%-8s %-12s %6d tok %7.1f s %8.1f tok/s  x%.3f of free  finish %s  %s%s" % (
            name, mode, st["tokens"], wall, tps, tps / free_tps if free_tps else 0, json.dumps(st["finish"]), extra,
            err))
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
        bench("cinfer", url, ["free", "json_schema", "json_object", "regex"], n_requests, max_tokens, False)
    finally:
        stop(p)
    if llama != "-" and os.path.exists(llama):
        p = start([llama, "-m", model, "--port", str(port), "-t", threads, "-c", str(4096 * STREAMS), "-np",
                   str(STREAMS), "--no-warmup"], url + "/health", log)
        try:
            bench("llama", url, ["free", "json_schema", "json_object"], n_requests, max_tokens, True)
        finally:
            stop(p)
    else:
        print("llama    (peer not run: no llama-server binary at %s)" % llama)


if __name__ == "__main__":
    main()
