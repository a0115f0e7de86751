"""store_ttft.py - TTFT of a long prompt prefix loaded from the persistent KV store vs recomputed
(issue 8 benchmark; bench/README.md "Persistent KV store: TTFT through the server").

usage: bench/store_ttft.py CINFER_BIN MODEL.gguf N_TOKENS CTX THREADS STORE_DIR
Server A (fresh STORE_DIR) computes an N-token prompt (token ids, greedy, 1 output token) and
is stopped once its write-back is done; server B on the same directory answers the same prompt
from the store; then B answers it again from its in-memory prefix cache. TTFT is the server's
own (its request log, arrival to first token) and the client's (streamed). Prints one report."""
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request

if any(a in ("-h", "--help") for a in sys.argv[1:]):
    print(__doc__.split("\n\n", 1)[1])
    sys.exit(0)
if len(sys.argv) != 7 or any(a.startswith("-") for a in sys.argv[1:]):
    print("store_ttft.py: expected CINFER_BIN MODEL.gguf N_TOKENS CTX THREADS STORE_DIR (see store_ttft.py --help)",
          file=sys.stderr)
    sys.exit(2)
BIN, MODEL, N, CTX, THREADS, STORE = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], \
    sys.argv[6]


class Srv:
    def __init__(self):
        self.p = subprocess.Popen([BIN, "serve", MODEL, "--port", "0", "--ctx", str(CTX), "-t", THREADS,
                                   "--kv-store", STORE, "--served-model-name", "m"], stderr=subprocess.PIPE,
                                  text=True)
        self.log, self.port = [], None
        threading.Thread(target=self.read, daemon=True).start()
        while self.port is None:
            if self.p.poll() is not None:
                sys.exit("server failed: " + "".join(self.log))
            time.sleep(0.05)

    def read(self):
        for line in self.p.stderr:
            self.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.port) as r:
            return {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in r.read().decode().splitlines()
                                              if ln and not ln.startswith("#"))}

    def n_logged(self):
        return len(re.findall(r"ttft=", "".join(self.log)))

    def ask(self, ids):
        body = json.dumps({"model": "m", "prompt": ids, "max_tokens": 1, "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}}).encode()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % self.port, data=body,
                                     headers={"Content-Type": "application/json"})
        n0 = self.n_logged()
        t0, ttft, cached, text = time.time(), None, None, ""
        with urllib.request.urlopen(req, timeout=1800) as r:
            for line in r:
                line = line.decode().strip()
                if not line.startswith("data: {"):
                    continue
                ev = json.loads(line[6:])
                if ev.get("choices"):
                    ttft = ttft or time.time() - t0
                    text += ev["choices"][0].get("text", "")
                if ev.get("usage"):
                    cached = (ev["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        while self.n_logged() <= n0:  # the server logs the request just after the response ends
            time.sleep(0.01)
        server_ttft = float(re.findall(r"ttft=([0-9.]+)s", "".join(self.log))[-1])
        return {"client": ttft, "server": server_ttft, "cached": cached, "text": text}

    def stop(self):
        self.p.terminate()
        self.p.wait(600)


ids = [random.Random(8).randrange(3, 500) for _ in range(N)]
a = Srv()
a.ask(ids[:8][::-1])  # warm-up (another prefix)
cold = a.ask(ids)
full = (N - 1) // 16
t = time.time()
while True:
    m = a.metrics()
    if m["cinfer_kv_store_objects_written_total"] >= full or time.time() - t > 600:
        break
    time.sleep(0.2)
wb = time.time() - t
a.stop()
b = Srv()
b.ask(ids[:8][::-1])
store = b.ask(ids)
mem = b.ask(ids)
m = b.metrics()
b.stop()
du = subprocess.run(["du", "-sh", STORE], capture_output=True, text=True).stdout.split()[0]
print("prompt %d tokens, model %s, ctx %d, %s threads" % (N, os.path.basename(MODEL), CTX, THREADS))
print("recompute (cold)    TTFT server %8.3f s  client %8.3f s  cached %d" % (cold["server"], cold["client"],
                                                                               cold["cached"]))
print("store (restart)     TTFT server %8.3f s  client %8.3f s  cached %d  (%.1fx faster, server)" % (
    store["server"], store["client"], store["cached"], cold["server"] / store["server"]))
print("memory prefix cache TTFT server %8.3f s  client %8.3f s  cached %d" % (mem["server"], mem["client"],
                                                                              mem["cached"]))
print("store: %d objects written by A (write-back finished %.1f s after the response), %s on disk; "
      "B loaded %d bytes in %d load(s), %.3f s total load latency" % (
          full, wb, du, m["cinfer_kv_store_bytes_read_total"], m["cinfer_kv_store_load_latency_seconds_count"],
          m["cinfer_kv_store_load_latency_seconds_sum"]))
print("same greedy token: %s" % (cold["text"] == store["text"] == mem["text"]))
