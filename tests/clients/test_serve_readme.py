"""test_serve_readme.py - the examples in README.md's "Serving" section are executed against a
real server (so they cannot drift): every `curl` command of its sh block and its Python SDK
snippet, with the documented 127.0.0.1:8080 replaced by the test server's address. Also runs
scripts/run-server.sh (what `make run` does) on a free port and the curl command it prints.
Run by tests/integration/serve_readme.sh."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import unittest

from cinfer_server import ROOT, SHARED, Server

DOC_URL = "http://127.0.0.1:8080"


def serving_section():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    m = re.search(r"^## Serving\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "README.md has no '## Serving' section"
    return m.group(1)


def blocks(section, lang):
    return re.findall(r"^```%s\n(.*?)^```" % lang, section, re.S | re.M)


def curl_commands(section):
    cmds = []
    for block in blocks(section, "sh"):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = cmd.strip()
            if cmd.startswith("curl "):
                cmds.append(cmd)
    return cmds


def check_output(tc, cmd, out):
    tc.assertTrue(out.strip(), "no output from: " + cmd)
    if out.lstrip().startswith("{"):
        body = json.loads(out)
        tc.assertFalse(body.get("error"), cmd)  # Responses objects carry "error": null
        tc.assertNotEqual(body.get("type"), "error", cmd)  # Anthropic's error shape
    if "data: " in out:
        events = [l for l in out.splitlines() if l.startswith("data: ")]
        tc.assertEqual(events[-1], "data: [DONE]", cmd)
        for e in events[:-1]:
            json.loads(e[6:])


class TestReadme(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = Server(ctx=512)

    @classmethod
    def tearDownClass(cls):
        assert cls.srv.stop() == 0

    def test_curl_examples(self):
        cmds = curl_commands(serving_section())
        self.assertGreaterEqual(len(cmds), 5)
        for cmd in cmds:
            self.assertIn(DOC_URL, cmd)
            run = cmd.replace(DOC_URL, self.srv.url)
            with self.subTest(cmd=cmd):
                p = subprocess.run(["bash", "-o", "pipefail", "-c", run], capture_output=True, text=True, timeout=60)
                self.assertEqual(p.returncode, 0, "%s\n%s" % (cmd, p.stderr))
                check_output(self, cmd, p.stdout)

    def test_python_example(self):
        py = blocks(serving_section(), "python")
        self.assertEqual(len(py), 1)
        code = py[0].replace(DOC_URL, self.srv.url)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.strip())


class TestMakeRun(unittest.TestCase):
    def test_run_server_prints_a_working_curl(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, CINFER_PORT=str(port), CINFER_SHARED=SHARED)
        p = subprocess.Popen([os.path.join(ROOT, "scripts", "run-server.sh")], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            curl = None
            for line in p.stdout:
                if line.startswith("  curl "):
                    curl = line.strip()
                    break
            self.assertIsNotNone(curl, "run-server.sh printed no curl command")
            for line in p.stderr:
                if "listening on" in line:
                    break
            out = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 0, out.stderr)
            body = json.loads(out.stdout)
            self.assertTrue(body["choices"][0]["message"]["content"])
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(30), 0)
        finally:
            p.stdout.close()
            p.stderr.close()
            if p.poll() is None:
                p.kill()
                p.wait()


if __name__ == "__main__":
    unittest.main(verbosity=2)
