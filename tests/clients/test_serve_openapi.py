"""test_serve_openapi.py - docs/openapi.yaml checked against a live `cinfer serve` by schemathesis.

Run by tests/integration/serve_openapi.sh. The server (stories260K, --ctx 512, a free loopback
port, --api-key) is started by cinfer_server.Server; schemathesis (pinned in requirements.txt)
runs every phase (examples, coverage, fuzzing, stateful) with a fixed seed and a bounded number
of examples per operation, sending the key, with the checks not_a_server_error,
status_code_conformance, content_type_conformance and response_schema_conformance (SSE events
included) and ignored_auth (every secured operation refuses a request without a valid key). A
second, short run sends the key as Anthropic's x-api-key instead of Authorization: Bearer. The
server must still answer /health afterwards and exit cleanly on SIGTERM. test_keepalive_framing
keeps two HTTP framing bugs this suite found fixed (HEAD bodies, unread TRACE bodies).

Generation is narrowed for speed and for this model only, in a copy of the spec (the responses
described are the spec's own): generation lengths are required and at most 16 (the spec allows
no limit, which runs to the end of the context), n and best_of at most 4, token ids and
logit_bias keys below stories260K's vocabulary (512). Environment: OPENAPI_MAX_EXAMPLES (30),
OPENAPI_SEED (20261201).
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import yaml

from cinfer_server import ROOT, Server

SPEC = os.path.join(ROOT, "docs", "openapi.yaml")
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemathesis.toml")
SCHEMATHESIS = os.path.join(os.path.dirname(sys.executable), "schemathesis")
N_VOCAB = 512  # stories260K
KEY = "sk-openapi-test"
MAX_EXAMPLES = int(os.environ.get("OPENAPI_MAX_EXAMPLES", "30"))
SEED = os.environ.get("OPENAPI_SEED", "20261201")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


def narrowed_spec(path):
    """The spec with request generation narrowed for a fast run on stories260K."""
    with open(path) as f:
        out = yaml.safe_load(f)
    s = out["components"]["schemas"]

    def limit(schema, field, hi, required=True):
        schema["properties"][field]["maximum"] = hi
        if required:
            schema.setdefault("required", []).append(field)

    def own(schema):  # the allOf member with the schema's own properties
        return next(m for m in schema["allOf"] if "properties" in m)

    limit(s["SamplingOpenAI"], "max_tokens", 16)
    limit(s["SamplingOpenAI"], "n", 4, required=False)
    limit(own(s["ChatRequest"]), "max_completion_tokens", 16, required=False)
    limit(own(s["CompletionRequest"]), "best_of", 4, required=False)
    limit(own(s["MessagesRequest"]), "max_tokens", 16)
    limit(s["ResponsesRequest"], "max_output_tokens", 16)
    s["TokenIds"]["items"]["maximum"] = N_VOCAB - 1
    s["DetokenizeRequest"]["properties"]["tokens"]["items"]["maximum"] = N_VOCAB - 1
    s["LogitBias"]["propertyNames"]["pattern"] = "^(0|[1-9][0-9]?|[1-4][0-9]{2}|50[0-9]|51[01])$"
    # thinking.budget_tokens must be below max_tokens (<= 16 here): never satisfiable, leave it out
    s["MessagesFields"]["properties"]["thinking"]["oneOf"].pop(0)
    return out


class OpenAPITest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cinfer-openapi-")
        cls.spec = os.path.join(cls.tmp, "openapi.yaml")
        with open(cls.spec, "w") as f:
            yaml.safe_dump(narrowed_spec(SPEC), f, sort_keys=False)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def schemathesis(self, url, header, max_examples, checks, extra=()):
        cmd = [SCHEMATHESIS, "--config-file", CONFIG, "run", self.spec, "--url", url, "--checks", checks,
               "--max-examples", str(max_examples), "--seed", SEED,
               "--workers", "1", "--header", header, "--request-timeout", "20",
               "--output-truncate", "false"] + list(extra)
        t0 = time.time()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600,
                           cwd=self.tmp)  # its .hypothesis/ database goes with the temporary directory
        print("schemathesis (%.1fs, rc %d): %s" % (time.time() - t0, r.returncode, " ".join(cmd[1:])))
        print(r.stdout[-60000:])
        return r.returncode, r.stdout

    def test_spec_against_server(self):
        srv = Server("--api-key", KEY, "--log-level", "warn")
        try:
            rc, out = self.schemathesis(srv.url, "Authorization: Bearer " + KEY, MAX_EXAMPLES, CHECKS + ",ignored_auth")
            self.assertEqual(rc, 0, "schemathesis found failures (see above)")
            self.assertNotIn("Runtime Error", out)
            # Anthropic's header, on the Anthropic operations (a shorter run). No ignored_auth here: it
            # would send a bad Bearer next to the good x-api-key, which wins (a 200 is right).
            rc, out = self.schemathesis(srv.url, "x-api-key: " + KEY, max(5, MAX_EXAMPLES // 3), CHECKS,
                                        ["--include-path-regex", "^/v1/messages", "--phases", "examples,fuzzing"])
            self.assertEqual(rc, 0, "schemathesis found failures with x-api-key (see above)")
            status, _, body = srv.http("GET", "/health")
            self.assertEqual((status, body), (200, b'{"status":"ok"}'), "the server must survive the run")
            status, _, _ = srv.http("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})
            self.assertEqual(status, 200)
        finally:
            code = srv.stop()
            log = srv.log_text()
        self.assertEqual(code, 0, "server exit code; log tail:\n" + log[-3000:])
        for bad in ("AddressSanitizer", "runtime error", "Assertion", "Segmentation"):
            self.assertNotIn(bad, log)

    def test_keepalive_framing(self):
        """Found with this suite: a HEAD answer carried its body (libevent 2.1 sends it) and the body of a
        TRACE / HEAD request (which evhttp does not read) was parsed as the next request."""
        srv = Server()
        try:
            def exchange(raw):
                with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as c:
                    c.sendall(raw)
                    data = b""
                    while True:
                        try:
                            d = c.recv(65536)
                        except socket.timeout:
                            break
                        if not d:
                            break
                        data += d
                        if data.endswith(b'{"status":"ready"}') or b"Connection: close" in data and b"\r\n\r\n{" in data:
                            break
                    return data

            # HEAD then GET on one connection: the HEAD answer has no body, the GET answer follows it
            out = exchange(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
            head, _, rest = out.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 200"), out)
            self.assertTrue(rest.startswith(b"HTTP/1.1 200"), out)
            self.assertTrue(rest.endswith(b'{"status":"ready"}'), out)
            # TRACE: our 405 in OpenAI's shape (not evhttp's 501); with a body the connection closes
            out = exchange(b'TRACE /v1/models HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}'
                           b"PUT /tokenize HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertTrue(out.startswith(b"HTTP/1.1 405"), out)
            self.assertIn(b"Connection: close", out)
            self.assertIn(b'"code":"method_not_allowed"', out)
            self.assertNotIn(b"501", out)
            status, _, _ = srv.http("GET", "/health")
            self.assertEqual(status, 200)
        finally:
            self.assertEqual(srv.stop(), 0)


if __name__ == "__main__":
    unittest.main()
