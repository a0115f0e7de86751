"""cinfer_router.py - starts a real `cinfer router` in front of `cinfer serve` workers for the
router tests (tests/clients/test_router.py) and stops it.

The router binds 127.0.0.1 (--port 0 unless a port is given, e.g. to restart on the same one); the
port is read from its "listening on" line; its stderr is collected. Every router is killed when the
process exits (atexit), so no test leaves one behind.
"""
import atexit
import json
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from cinfer_server import BIN

_live = []


def _kill_all():
    for p in _live:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(_kill_all)


class Router:
    def __init__(self, workers, *args, port=0, startup_timeout=30, wait_healthy=True):
        """workers: base URLs (optionally with @role)."""
        cmd = [BIN, "router", "--port", str(port), "--health-interval", "0.2"]
        for w in workers:
            cmd += ["--worker", w]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
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
            raise RuntimeError("cinfer router did not start: " + "".join(self.log)[-2000:])
        self.url = "http://127.0.0.1:%d" % self.port
        if wait_healthy:
            self.wait_workers(lambda ws: all(w["healthy"] for w in ws))

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

    def http(self, method, path, body=None, headers=None, timeout=60):
        """Raw HTTP: (status, headers, body bytes); never raises for HTTP errors."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        if data is not None and "Content-Type" not in (headers or {}):
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def workers(self):
        status, _, body = self.http("GET", "/workers")
        assert status == 200, body
        return json.loads(body)["workers"]

    def wait_workers(self, pred, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred(self.workers()):
                return
            time.sleep(0.05)
        raise AssertionError("workers never reached the state: %s" % json.dumps(self.workers()))

    def metrics(self):
        status, _, body = self.http("GET", "/metrics")
        assert status == 200
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

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
