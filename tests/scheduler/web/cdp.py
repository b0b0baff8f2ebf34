"""Headless Chromium driven through the DevTools protocol over a pipe (--remote-debugging-pipe:
commands on the browser's fd 3, answers and events from its fd 4, each a JSON message ended by a
NUL byte), with the standard library only: open a page, evaluate script in it, take screenshots."""
import base64
import json
import os
import select
import subprocess
import tempfile
import time


class Browser:
    def __init__(self, chromium, width=1280, height=1000):
        self.profile = tempfile.mkdtemp(prefix="esw-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds_3_and_4():
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        # --no-sandbox: tests run as root in CI, where Chromium's sandbox refuses to start.
        self.proc = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-pipe",
             "--user-data-dir=" + self.profile, "--window-size=%d,%d" % (width, height), "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds_3_and_4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buf = b""
        self.next_id = 0
        self.session = None
        self.size = (width, height)

    def call(self, method, timeout=60, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if self.session and not method.startswith("Target."):
            msg["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + timeout
        while True:
            while b"\0" in self.buf:
                raw, self.buf = self.buf.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self.next_id:
                    if "error" in reply:
                        raise AssertionError("%s: %s" % (method, reply["error"]))
                    return reply.get("result", {})
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError("chromium did not answer %s" % method)
            if select.select([self.from_browser], [], [], left)[0]:
                chunk = os.read(self.from_browser, 1 << 20)
                if not chunk:
                    raise AssertionError("chromium closed its pipe during %s" % method)
                self.buf += chunk

    def open(self, url):
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", width=self.size[0], height=self.size[1], deviceScaleFactor=1,
                  mobile=False)
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise AssertionError("script failed: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        try:
            self.call("Browser.close", timeout=10)
        except AssertionError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        subprocess.run(["rm", "-rf", self.profile], check=False)
