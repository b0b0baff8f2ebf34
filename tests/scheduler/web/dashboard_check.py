"""ctest scheduler.web_dashboard: the dashboard as a person sees it. A daemon on three CPU devices
with two teams runs real training jobs (`ember train`, reporting progress) and jobs held by gate
files; headless Chromium loads the page and the test reads the DOM after the script ran: the device
grid coloured by team, the jobs' names, states and progress, the teams, the chart's points. Then a
job ends, and the same page, not reloaded, shows it ended. Screenshots go to OUTDIR.
Usage: dashboard_check.py EMBER CHROMIUM SOURCE_DIR OUTDIR"""
import json
import os
import sys

from cdp import Browser
from harness import Daemon, wait_for

# What the page shows, read from its DOM (after its script ran and polled the daemon); while the page
# is still loading, no refresh yet.
PAGE = """(() => !document.body || !document.getElementById('summary') ? {refreshes: 0, jobs: {}} : ({
  refreshes: Number(document.body.dataset.refreshes || 0),
  summary: document.getElementById('summary').textContent,
  devices: [...document.querySelectorAll('#devices .device')].map((d) => ({
    name: d.dataset.name, state: d.dataset.state, job: d.dataset.job || null, team: d.dataset.team || null,
    colour: getComputedStyle(d).backgroundColor, text: d.textContent})),
  jobs: Object.fromEntries([...document.querySelectorAll('#jobs tbody tr')].map((r) => [r.cells[1].textContent, {
    id: Number(r.cells[0].textContent), state: r.dataset.state, cells: [...r.cells].map((c) => c.textContent)}])),
  queue: [...document.querySelectorAll('#queue tbody tr')].map((r) => r.cells[1].textContent),
  teams: [...document.querySelectorAll('#teams .team')].map((t) => t.dataset.team + ': ' + t.textContent),
  chart: (document.getElementById('util-line') || {getAttribute: () => ''}).getAttribute('points') || '',
}))()"""


def page(browser):
    return browser.evaluate(PAGE)


def main(ember, chromium, source_dir, outdir):
    os.makedirs(outdir, exist_ok=True)
    model = os.path.join(source_dir, "models", "lenet5.pbtxt")
    with Daemon(ember) as d:
        train = lambda name, team: d.submit(name, team, [
            ember, "train", model, "--limit", "256", "--epochs", "2", "--batch-size", "32", "--threads", "1",
            "--workers", "0", "--checkpoint-dir", os.path.join(d.dir, name), "--overwrite"])
        train("lenet-vision", "vision")
        d.submit("held-vision", "vision", d.gate_command("gate-vision", "ember-progress epoch=1 epochs=3 step=12 "
                                                                       "loss=0.75 samples_per_s=321.5"))
        d.submit("held-speech", "speech", d.gate_command("gate-speech"))
        train("lenet-speech", "speech")  # waits: speech's one device is held
        wait_for(lambda: d.jobs()["held-speech"]["state"] == "running", "held-speech to run")

        browser = Browser(chromium)
        try:
            browser.open(d.url + "/")
            # The page fills in once its first poll is answered (and held-vision's report, printed
            # as it started, has been read from its log).
            def ready(s):
                held = s["jobs"].get("held-vision")
                return s if s["refreshes"] > 0 and len(s["jobs"]) == 4 and held and held["cells"][7] else None

            p = wait_for(lambda: ready(page(browser)), "the page's first refresh with every job")
            print(json.dumps(p, indent=1))
            assert len(p["devices"]) == 3, p["devices"]
            jobs = d.jobs()
            for dev in p["devices"]:
                if dev["state"] == "busy":
                    name = next(n for n, j in jobs.items() if str(j["id"]) == dev["job"])
                    assert name in dev["text"], dev  # the job's name on its device
                    assert dev["colour"] not in ("", "rgba(0, 0, 0, 0)", "rgb(228, 231, 235)"), dev  # coloured by team
            # held-vision and held-speech hold a device each until their gates open: both teams are
            # on the grid, in two colours.
            teams = {dev["team"]: dev["colour"] for dev in p["devices"] if dev["team"]}
            assert set(teams) == {"vision", "speech"} and teams["vision"] != teams["speech"], teams
            for name in ("lenet-vision", "held-vision", "held-speech", "lenet-speech"):
                assert name in p["jobs"], (name, p["jobs"])
            assert p["jobs"]["held-vision"]["state"] == "running"
            assert p["jobs"]["held-vision"]["cells"][7:11] == ["1/3", "12", "0.7500", "321.5"], p["jobs"]["held-vision"]
            assert any(t.startswith("vision: ") for t in p["teams"]) and any(t.startswith("speech: ") for t in p["teams"])
            assert len(p["chart"].split()) >= 2, "the chart has no points: %r" % p["chart"]
            browser.screenshot(os.path.join(outdir, "dashboard-1-running.png"))

            # The real training jobs report their epochs and losses, and the page shows them.
            q = wait_for(lambda: (lambda s: s if s["jobs"]["lenet-vision"]["cells"][7] == "2/2" else None)(page(browser)),
                         "lenet-vision's second epoch on the page")
            assert float(q["jobs"]["lenet-vision"]["cells"][9]) > 0, q["jobs"]["lenet-vision"]

            # A job ends: the same page (no reload) shows it, and its device given to another job.
            before = page(browser)["refreshes"]
            d.open_gate("gate-speech")
            r = wait_for(lambda: (lambda s: s if s["jobs"]["held-speech"]["state"] == "done" else None)(page(browser)),
                         "the page to show held-speech done")
            assert r["refreshes"] > before
            assert d.jobs()["held-speech"]["state"] == "done"
            r = wait_for(lambda: (lambda s: s if s["jobs"]["lenet-speech"]["state"] != "queued" else None)(page(browser)),
                         "lenet-speech to start on the page")
            assert "lenet-speech" not in r["queue"], r["queue"]
            assert len(r["chart"].split()) > len(p["chart"].split()), (r["chart"], p["chart"])
            browser.screenshot(os.path.join(outdir, "dashboard-2-after-a-job-ended.png"))
            print(json.dumps(r, indent=1))
        finally:
            browser.close()
        d.open_gate("gate-vision")
    print("dashboard_check: the page showed the grid, jobs, progress, teams and chart, and updated after a job "
          "ended; screenshots in " + outdir)


if __name__ == "__main__":
    main(*sys.argv[1:])
