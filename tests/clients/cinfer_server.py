"""cinfer_server.py - starts a real `cinfer serve` for client tests and stops it.

Used by the tests/clients/test_serve_*.py suites (run by tests/integration/serve_*.sh).
The server binds 127.0.0.1 on a free port (--port 0; the port is read from its
"listening on" line), serves the model given by CINFER_SHARED (stories260K.gguf
by default), and its stderr (one log line per request) is collected in .log.
stop() sends SIGTERM and returns the exit code; the server is always killed when
the process exits (atexit), so no test leaves one behind.
"""
import atexit
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
import json

# the model_name label every /metrics sample starts with (vLLM's convention)
MODEL_LABEL = re.compile(r'model_name="(?:[^"\\]|\\.)*",?')
import fixtures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("CINFER_SHARED", os.path.join(ROOT, "..", "shared"))
BIN = os.environ.get("CINFER_BIN", os.path.join(ROOT, "build", "cinfer"))
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
MODEL_NAME = "stories260K"
# The KV cache type a parametrised test's servers use (CMakeLists.txt *_kv_<type> variants); "" = the default.
KV_DTYPE = os.environ.get("CINFER_TEST_KV_DTYPE", "")

fixtures.require(BIN, "cinfer binary (CINFER_BIN)")
fixtures.require(MODEL, "model")

_live = []


def _kill_all():
    for p in _live:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_all)


class Server:
    def __init__(self, *args, ctx=512, threads=1, startup_timeout=60, model=None, env=None, nofile=None):
        """nofile: the server's open-file limit (RLIMIT_NOFILE), e.g. to test running out of descriptors."""
        cmd = [BIN, "serve", model or MODEL, "--port", "0", "--ctx", str(ctx), "-t", str(threads)] + list(args)
        if KV_DTYPE and "--kv-dtype" not in args:
            cmd += ["--kv-dtype", KV_DTYPE]

        def limit_files():
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     env=dict(os.environ, **env) if env else None,
                                     preexec_fn=limit_files if nofile else None)
        _live.append(self.proc)
        self.log = []
        self._cv = threading.Condition()
        self.port = None
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.time() + startup_timeout
        with self._cv:
            while self.port is None and self.proc.poll() is None and time.time() < deadline:
                self._cv.wait(0.1)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("cinfer serve did not start: " + "".join(self.log)[-2000:])
        self.url = "http://127.0.0.1:%d" % self.port

    def _read(self):
        for line in self.proc.stderr:
            with self._cv:
                self.log.append(line)
                m = re.search(r"listening on http://[^:]+:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                self._cv.notify_all()

    def log_text(self):
        with self._cv:
            return "".join(self.log)

    def wait_log(self, pattern, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.log_text()):
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        self._reader.join(5)
        return self.proc.returncode

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def http(self, method, path, body=None, headers=None, timeout=30):
        """Raw HTTP: returns (status, headers, body bytes); never raises for HTTP errors."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        if data is not None and "Content-Type" not in (headers or {}):
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def metrics(self):
        """GET /metrics parsed into {name_with_labels: value}. Every sample must carry the
        model_name label; it is left out of the keys (cinfer_requests_total{status="200"})."""
        status, _, body = self.http("GET", "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                assert MODEL_LABEL.search(k), "no model_name label: " + line
                out[MODEL_LABEL.sub("", k, count=1).replace("{}", "")] = float(v)
        return out
