"""Starts nabla-serve on a free loopback port for the serve tests; small HTTP helpers."""
import html
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


class Server:
    def __init__(self, binary, checkpoint, *flags):
        self.dir = tempfile.mkdtemp(prefix="nabla_serve_")
        port_file = os.path.join(self.dir, "port")
        self.log_path = os.path.join(self.dir, "log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--checkpoint", checkpoint, "--port", "0", "--port-file", port_file,
             "--threads", "1", *flags], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                sys.exit(f"nabla-serve did not start:\n{self.output()}")
            time.sleep(0.05)
        self.port = int(open(port_file).read())

    def request(self, method, path, body=None, timeout=60, headers=None):
        """(status, parsed JSON or text). A new connection per request (Connection: close)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            if isinstance(body, str):
                body = body.encode()
            conn.request(method, path, body=body,
                         headers={"Connection": "close", **(headers or {})})
            res = conn.getresponse()
            data = res.read()
            try:
                return res.status, json.loads(data)
            except ValueError:
                return res.status, data.decode(errors="replace")
        finally:
            conn.close()

    def predict(self, payload, timeout=60):
        body = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
        return self.request("POST", "/v1/predict", body, timeout)

    def output(self):
        self.log.flush()
        return open(self.log_path).read()

    def stop(self, timeout=60):
        """SIGTERM, then the exit code (kills and fails after `timeout` s)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            sys.exit(f"nabla-serve did not stop within {timeout} s after SIGTERM")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


def find_chromium():
    """Debian's chromium, or exit 77 (ctest's skip) with a message when it is not installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium is not installed (scripts/setup.sh --browser installs it)")
        sys.exit(77)
    return chromium


def run_chromium(chromium, url, *mode):
    """Headless chromium on url with a fresh profile; mode: --dump-dom or --screenshot=..."""
    profile = tempfile.mkdtemp(prefix="nabla_chromium_")
    try:
        # --virtual-time-budget lets the page's fetch finish before the DOM is dumped.
        return subprocess.run(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-dev-shm-usage", f"--user-data-dir={profile}",
             "--virtual-time-budget=20000", *mode, url],
            capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(chromium, url, path, height):
    """Keeps a screenshot of the page at url (900 px wide) in path; fails if none was written."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    shot = run_chromium(chromium, url, f"--screenshot={os.path.abspath(path)}",
                        f"--window-size=900,{height}", "--hide-scrollbars")
    check(os.path.exists(path) and os.path.getsize(path) > 10000,
          f"no screenshot: {shot.stderr[-2000:]}")


def selftest_element(dom):
    """(text, attributes) of the page's #selftest element in a --dump-dom output."""
    found = re.search(r'<div id="selftest"([^>]*)>([^<]*)</div>', dom)
    if not found:
        return "", {}
    attributes = {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', found[1])}
    return html.unescape(found[2]).strip(), attributes
