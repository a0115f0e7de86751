"""test_store_degrade.py - issue 8 acceptance 4: the store degrades, serving continues.
- ENOSPC: the store on a 256 KiB tmpfs: every request succeeds with the cold output, the
  store's write errors / degradation are counted, no temporary is left behind.
- read-only: a store filled by one server, then remounted read-only: the next server loads
  from it (cached tokens), its own writes are dropped and counted, the store is not writable.
- unusable: --kv-store names a regular file: served without a store, logged, counted.
- deleted underneath: the directory of a running server is removed; requests still succeed
  (same outputs) and the write failures are counted.
Mounts need root (CAP_SYS_ADMIN); those cases skip with a message when mount fails.
stories260K. Run by tests/integration/store_degrade.sh."""
import os
import shutil
import subprocess
import tempfile
import unittest

from cinfer_server import Server
import store_util as su

N = 300
PROMPTS = [su.prompt_ids(700 + i, N) for i in range(8)]


def mount(*args):
    p = subprocess.run(["mount"] + list(args), capture_output=True, text=True)
    return p.returncode == 0, p.stderr.strip()


class TestStoreDegrade(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        srv = Server()
        try:
            cls.cold = [su.complete(srv, p, max_tokens=8)["text"] for p in PROMPTS]
        finally:
            srv.stop()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="cinfer-store-degrade-")
        self.mnt = os.path.join(self.tmp, "mnt")
        os.mkdir(self.mnt)
        self.mounted = False

    def tearDown(self):
        if self.mounted:
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def tmpfs(self, size):
        ok, msg = mount("-t", "tmpfs", "-o", "size=" + size, "tmpfs", self.mnt)
        if not ok:
            self.skipTest("cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): " + msg)
        self.mounted = True

    def test_enospc(self):
        self.tmpfs("256k")
        srv = Server("--kv-store", self.mnt)
        try:
            got = [su.complete(srv, p, max_tokens=8)["text"] for p in PROMPTS]
            su.wait_written(srv, 10**9, timeout=2)  # let write-back settle
            m = srv.metrics()
            self.assertEqual(got, self.cold)
            again = su.complete(srv, PROMPTS[0], max_tokens=8)  # still serving (memory cache)
            self.assertEqual(again["text"], self.cold[0])
        finally:
            self.assertEqual(srv.stop(), 0)
        print("\nENOSPC: written %d, write errors %d, dropped %d, degraded %d" % (
            m["cinfer_kv_store_objects_written_total"], m["cinfer_kv_store_write_errors_total"],
            m["cinfer_kv_store_writes_dropped_total"], m["cinfer_kv_store_degraded_total"]))
        self.assertGreater(m["cinfer_kv_store_write_errors_total"], 0)
        self.assertGreater(m["cinfer_kv_store_degraded_total"], 0)
        self.assertGreater(m["cinfer_kv_store_writes_dropped_total"], 0)
        self.assertEqual(srv.log_text().count("writes disabled"), 1)  # logged once
        self.assertEqual(su.cli("store", "verify", self.mnt)[0], 0)
        rc, out = su.cli("store", "stats", self.mnt)
        self.assertIn("temporaries   0", out)

    def test_read_only(self):
        self.tmpfs("16m")
        a = Server("--kv-store", self.mnt)
        try:
            first = su.complete(a, PROMPTS[0], max_tokens=8)
            self.assertEqual(su.wait_written(a, su.blocks(N, 8)), su.blocks(N, 8))
        finally:
            a.stop()
        ok, msg = mount("-o", "remount,ro", self.mnt)
        self.assertTrue(ok, msg)
        b = Server("--kv-store", self.mnt)
        try:
            hit = su.complete(b, PROMPTS[0], max_tokens=8)
            other = su.complete(b, PROMPTS[1], max_tokens=8)
            m = b.metrics()
        finally:
            self.assertEqual(b.stop(), 0)
        self.assertEqual(hit["text"], first["text"])
        self.assertEqual(hit["cached"], (N - 1) // su.BLOCK * su.BLOCK)
        self.assertEqual(other["text"], self.cold[1])
        self.assertEqual(m["cinfer_kv_store_enabled"], 1)
        self.assertEqual(m["cinfer_kv_store_writable"], 0)
        self.assertGreater(m["cinfer_kv_store_writes_dropped_total"], 0)
        self.assertEqual(m["cinfer_kv_store_objects_written_total"], 0)

    def test_unusable_directory(self):
        path = os.path.join(self.tmp, "a-file")
        with open(path, "w") as f:
            f.write("not a directory\n")
        srv = Server("--kv-store", path)
        try:
            got = [su.complete(srv, p, max_tokens=8)["text"] for p in PROMPTS[:2]]
            m = srv.metrics()
        finally:
            self.assertEqual(srv.stop(), 0)
        self.assertEqual(got, self.cold[:2])
        self.assertEqual(m["cinfer_kv_store_enabled"], 0)
        self.assertEqual(m["cinfer_kv_store_degraded_total"], 1)
        self.assertIn(path, srv.log_text())  # the one warning names the directory

    def test_deleted_underneath(self):
        store = os.path.join(self.tmp, "store")
        srv = Server("--kv-store", store)
        try:
            self.assertEqual(su.complete(srv, PROMPTS[0], max_tokens=8)["text"], self.cold[0])
            su.wait_written(srv, su.blocks(N, 8))
            shutil.rmtree(store)
            got = [su.complete(srv, p, max_tokens=8)["text"] for p in PROMPTS[1:]]
            su.wait_written(srv, 10**9, timeout=2)
            m = srv.metrics()
            self.assertEqual(got, self.cold[1:])
        finally:
            self.assertEqual(srv.stop(), 0)
        print("\ndeleted: write errors %d, dropped %d, degraded %d" % (
            m["cinfer_kv_store_write_errors_total"], m["cinfer_kv_store_writes_dropped_total"],
            m["cinfer_kv_store_degraded_total"]))
        self.assertGreater(m["cinfer_kv_store_write_errors_total"], 0)
        self.assertGreater(m["cinfer_kv_store_writes_dropped_total"], 0)
        self.assertEqual(m["cinfer_kv_store_degraded_total"], 1)  # logged once, not once per write
        self.assertEqual(m["cinfer_kv_store_writable"], 0)
        self.assertEqual(srv.log_text().count("writes disabled"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
