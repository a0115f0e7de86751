"""test_store_safety.py - issue 14 §4.4 and §4.7 end to end through `cinfer serve --kv-store`:

- a FIFO planted under a valid object name (the first block of a prompt's chain): a request
  that would load it is answered like a cold run, the FIFO goes to quarantine/ (the store opens
  objects O_NONBLOCK | O_NOFOLLOW and takes only regular files), and SIGTERM right after the
  request makes the server exit 0 within the shutdown timeout (before the fix an I/O thread
  blocked in open() forever and shutdown joined it); `cinfer store verify` reports the FIFO
  as bad without hanging;
- authenticated objects (--kv-store-key-file): a keyed server writes version-2 objects with a
  32-byte HMAC trailer, `cinfer store verify --key-file` accepts them (and rejects them under
  another key), a keyed server loads them; objects written without a key are quarantined by a
  keyed server (output still equals a cold run); a world-readable key file is refused at start.
stories260K. Run by tests/integration/store_safety.sh."""
import os
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import threading
import time
import unittest

from cinfer_server import BIN, MODEL, Server
import store_util as su

N = 100
PROMPT = su.prompt_ids(4242, N)
OTHER = su.prompt_ids(4343, N)
SHUTDOWN_S = 5


def quarantined(store):
    q = os.path.join(store, "quarantine")
    return [os.path.join(q, f) for f in os.listdir(q)] if os.path.isdir(q) else []


def write_key(path, mode=0o600, n=48):
    with open(path, "wb") as f:
        f.write(os.urandom(n))
    os.chmod(path, mode)
    return path


class TestStoreSafety(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        srv = Server()
        try:
            cls.cold = {tuple(p): su.complete(srv, p, max_tokens=8)["text"] for p in (PROMPT, OTHER)}
        finally:
            assert srv.stop() == 0

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cinfer-store-safety-")
        self.store = os.path.join(self.dir, "store")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def fill(self, prompt, *args):
        """A server writes the prompt's chain into self.store, then exits cleanly."""
        srv = Server("--kv-store", self.store, *args)
        try:
            self.assertEqual(su.complete(srv, prompt, max_tokens=8)["text"], self.cold[tuple(prompt)])
            self.assertEqual(len(su.wait_chains(self.store, [prompt])), 1)
        finally:
            self.assertEqual(srv.stop(), 0)
        paths = su.chain(self.store, prompt)
        self.assertGreaterEqual(len(paths), (N - 1) // su.BLOCK)
        return paths

    def test_fifo_object_then_sigterm(self):
        paths = self.fill(PROMPT)
        fifo = paths[0]
        os.unlink(fifo)
        os.mkfifo(fifo, 0o644)
        rc, out = su.cli("store", "verify", self.store)  # read-only: reports it, never opens it blocking
        self.assertEqual(rc, 1, out)
        self.assertIn("not a regular file", out)
        rc, out = su.cli("store", "stats", self.store)  # nor does stats block on it
        self.assertEqual(rc, 0, out)
        srv = Server("--kv-store", self.store, "--shutdown-timeout", str(SHUTDOWN_S))
        res = {}

        def send():
            try:
                res["r"] = su.complete(srv, PROMPT, max_tokens=8)
            except Exception as e:  # noqa: BLE001 - reported below
                res["e"] = e
        t = threading.Thread(target=send, daemon=True)
        t.start()
        t.join(30)
        self.assertIn("r", res, res.get("e"))
        self.assertEqual(res["r"]["text"], self.cold[tuple(PROMPT)])
        self.assertEqual(res["r"]["cached"], 0)  # the chain starts with the FIFO: nothing to load
        m = srv.metrics()
        self.assertGreaterEqual(m["cinfer_kv_store_quarantined_total"], 1)
        t0 = time.time()
        code = srv.stop(sig=signal.SIGTERM, timeout=SHUTDOWN_S + 10)
        dt = time.time() - t0
        print("\nFIFO object: quarantined, output = cold, SIGTERM -> exit %s in %.2f s" % (code, dt), end="")
        self.assertEqual(code, 0, srv.log_text()[-2000:])
        self.assertLess(dt, SHUTDOWN_S + 5)
        self.assertFalse(os.path.lexists(fifo) and stat.S_ISFIFO(os.lstat(fifo).st_mode))
        q = quarantined(self.store)
        self.assertTrue(any(stat.S_ISFIFO(os.lstat(p).st_mode) for p in q), q)
        self.assertIn("not a regular file", srv.log_text())

    def test_authenticated_objects(self):
        key = write_key(os.path.join(self.dir, "key"))
        other = write_key(os.path.join(self.dir, "other-key"))
        paths = self.fill(PROMPT, "--kv-store-key-file", key)
        for p in paths:
            with open(p, "rb") as f:
                h = f.read(160)
            n_tokens = struct.unpack_from("<I", h, 112)[0]
            header_len = (160 + 4 * n_tokens + 63) // 64 * 64
            payload_len = struct.unpack_from("<Q", h, 136)[0]
            self.assertEqual(struct.unpack_from("<I", h, 8)[0], 2)  # format version 2: authenticated
            self.assertEqual(struct.unpack_from("<I", h, 152)[0], 1)  # STORE_FLAG_MAC
            self.assertEqual(os.path.getsize(p), header_len + payload_len + 32)
        rc, out = su.cli("store", "verify", self.store, "--key-file", key)
        self.assertEqual(rc, 0, out)
        rc, out = su.cli("store", "verify", self.store, "--key-file", other)
        self.assertEqual(rc, 1, out)
        self.assertIn("MAC", out)
        rc, out = su.cli("store", "verify", self.store)  # without a key: the checksums alone
        self.assertEqual(rc, 0, out)
        # a keyed server loads them
        srv = Server("--kv-store", self.store, "--kv-store-key-file", key)
        try:
            r = su.complete(srv, PROMPT, max_tokens=8)
            self.assertEqual(r["text"], self.cold[tuple(PROMPT)])
            self.assertGreaterEqual(r["cached"], (N - 1) // su.BLOCK * su.BLOCK)
            self.assertEqual(srv.metrics()["cinfer_kv_store_quarantined_total"], 0)
        finally:
            self.assertEqual(srv.stop(), 0)
        # objects written without a key (what any writer on the share can do) are quarantined
        unkeyed = self.fill(OTHER)
        srv = Server("--kv-store", self.store, "--kv-store-key-file", key)
        try:
            r = su.complete(srv, OTHER, max_tokens=8)
            self.assertEqual(r["text"], self.cold[tuple(OTHER)])
            self.assertEqual(r["cached"], 0)
            self.assertGreaterEqual(srv.metrics()["cinfer_kv_store_quarantined_total"], 1)
        finally:
            self.assertEqual(srv.stop(), 0)
        # the keyed server recomputed the block and wrote it back authenticated under the same name
        with open(unkeyed[0], "rb") as f:
            self.assertEqual(struct.unpack_from("<I", f.read(12), 8)[0], 2)
        print("\nkeyed: %d v2 objects verified and loaded; unkeyed object quarantined" % len(paths), end="")

    def test_bad_key_file_refused(self):
        loose = write_key(os.path.join(self.dir, "loose"), mode=0o644)
        short = write_key(os.path.join(self.dir, "short"), n=16)
        for key, why in ((loose, "others"), (short, "bytes")):
            p = subprocess.run([BIN, "serve", MODEL, "--port", "0", "--kv-store", self.store,
                                "--kv-store-key-file", key], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(why, p.stderr)


if __name__ == "__main__":
    unittest.main()
