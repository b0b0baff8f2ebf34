"""A scheduler daemon for the web endpoint's checks (tests/scheduler/web): `ember sched serve` on CPU
devices with two teams and the endpoint on a free loopback port, the command-line clients, and
waits that poll with a deadline (nothing asserts on time)."""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

TIMEOUT = 120  # seconds any one wait may take on a loaded machine (or under a sanitizer)


def wait_for(pred, what, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


class Daemon:
    """The daemon in a fresh folder; `with Daemon(...) as d:` stops it and its jobs at the end."""

    def __init__(self, ember, devices="cpu:3", quota="vision 2\nspeech 1\n"):
        self.ember = ember
        self.dir = tempfile.mkdtemp(prefix="esw-")  # short: a Unix socket path has ~107 bytes
        self.state = os.path.join(self.dir, "state")
        with open(os.path.join(self.dir, "quota.txt"), "w") as f:
            f.write(quota)
        self.out = open(os.path.join(self.dir, "daemon.out"), "w")
        self.proc = subprocess.Popen(
            [ember, "sched", "serve", "--state", self.state, "--devices", devices, "--quota",
             os.path.join(self.dir, "quota.txt"), "--grace", "10", "--http", "127.0.0.1:0"],
            stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        self.port = int(wait_for(self._port, "the daemon's dashboard address"))
        self.url = "http://127.0.0.1:%d" % self.port

    def _port(self):
        if self.proc.poll() is not None:
            raise AssertionError("the daemon exited: " + self.log())
        m = re.search(r"dashboard at http://127\.0\.0\.1:(\d+)/", self.log())
        return m.group(1) if m else None

    def log(self):
        with open(os.path.join(self.dir, "daemon.out")) as f:
            return f.read()

    def sched(self, *args, check=True):
        r = subprocess.run([self.ember, "sched", args[0], "--state", self.state, *args[1:]], cwd=self.dir,
                           capture_output=True, text=True, timeout=TIMEOUT)
        if check and r.returncode != 0:
            raise AssertionError("ember sched %s failed (%d): %s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def submit(self, name, team, command, *extra):
        out = self.sched("submit", "--name", name, "--team", team, *extra, "--", *command).stdout
        return int(re.search(r"submitted job (\d+)", out).group(1))

    def gate_command(self, gate, progress=None):
        """A shell job that prints `progress` (an ember-progress line), then waits for the file `gate`."""
        path = os.path.join(self.dir, gate)
        say = "echo '%s'; " % progress if progress else ""
        # It gives up when the test's folder is gone, or after about five minutes.
        return ["/bin/sh", "-c", say + "n=0; while [ ! -e %s ]; do [ -d %s ] || exit 9; n=$((n+1)); "
                "[ $n -gt 6000 ] && exit 9; sleep 0.05; done" % (path, self.dir)]

    def open_gate(self, gate):
        open(os.path.join(self.dir, gate), "w").close()

    def jobs(self):
        """`ember sched status --all` as {name: {id, state, preempt, ...}} (job names have no spaces)."""
        lines = self.sched("status", "--all").stdout.splitlines()
        header = next(i for i, l in enumerate(lines) if l.startswith("ID "))
        out = {}
        for line in lines[header + 1:]:
            f = line.split()
            if len(f) >= 4 and f[0].isdigit():
                out[f[1]] = {"id": int(f[0]), "user": f[2], "state": f[3], "preemptions": int(f[7]), "line": line}
        return out

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.read().decode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            for j in self.jobs().values():
                if j["state"] in ("running", "stopping", "queued"):
                    self.sched("cancel", "--job", str(j["id"]), check=False)
        except Exception:  # the daemon may be gone already: its jobs are killed with its group below
            pass
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.out.close()
        shutil.rmtree(self.dir, ignore_errors=True)
