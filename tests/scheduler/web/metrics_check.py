"""ctest scheduler.web_metrics: a live daemon's /metrics, parsed by Prometheus's own parser (the
prometheus_client package's), checked against what `ember sched status` says of the same state.
Two teams on three CPU devices; jobs held by gate files, so nothing changes while both are read.
Usage: metrics_check.py EMBER SCHED_TRAINER"""
import sys

from prometheus_client.parser import text_string_to_metric_families

from harness import Daemon, wait_for


def samples(text):
    """{sample name: [(labels, value)]}; the parser raises on anything malformed."""
    out = {}
    for fam in text_string_to_metric_families(text):
        assert fam.documentation, "family %s has no HELP" % fam.name
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(fams, sample, **labels):
    rows = [v for l, v in fams.get(sample, []) if all(l.get(k) == w for k, w in labels.items())]
    assert len(rows) == 1, "%s%s: expected one sample, got %s" % (sample, labels, rows)
    return rows[0]


def main(ember, trainer):
    with Daemon(ember) as d:
        # vision: a real training job that finishes, one held at its gate and reporting progress,
        # one preempted once and held again; speech: one held, and one that waits for the device.
        done = d.submit("train-done", "vision", [trainer, "--steps", "6", "--out", d.dir + "/t.txt"])
        wait_for(lambda: d.jobs()["train-done"]["state"] == "done", "train-done to finish")
        d.submit("held", "vision", d.gate_command("gate-held", "ember-progress epoch=3 epochs=8 step=77 loss=0.125 "
                                                               "samples_per_s=2048.5"))
        wait_for(lambda: d.jobs()["held"]["state"] == "running", "held to run")
        pre = d.submit("preempted", "vision", d.gate_command("gate-pre"))
        wait_for(lambda: d.jobs()["preempted"]["state"] == "running", "preempted to run")
        d.sched("preempt", "--job", str(pre))
        wait_for(lambda: d.jobs()["preempted"]["preemptions"] == 1 and d.jobs()["preempted"]["state"] == "running",
                 "preempted to be preempted and to run again")
        d.submit("speech-held", "speech", d.gate_command("gate-speech"))
        d.submit("speech-waits", "speech", d.gate_command("gate-waits"))
        refused = d.sched("submit", "--team", "nlp", "--", "/bin/true", check=False)
        assert refused.returncode != 0 and "team 'nlp' has no share" in refused.stderr + refused.stdout, refused
        wait_for(lambda: d.jobs()["speech-held"]["state"] == "running", "speech-held to run")

        fams = samples(d.get("/metrics"))
        jobs = d.jobs()
        status = d.sched("status").stdout
        teams = d.sched("status", "--teams").stdout
        print(status, teams, sep="\n")

        # Devices: busy ones as the status line counts them ("devices 3/3 busy").
        busy, total = map(int, status.split("devices ")[1].split(" busy")[0].split("/"))
        assert value(fams, "ember_sched_devices", state="busy", type="cpu") == busy == 3
        assert value(fams, "ember_sched_devices", state="free", type="cpu") == total - busy
        # Jobs by state and team, against the status table (names tell the team here).
        for name, j in jobs.items():
            print(name, j["state"])
        by_state = {}
        for j in jobs.values():
            by_state[j["state"]] = by_state.get(j["state"], 0) + 1
        for state, n in by_state.items():
            got = sum(v for l, v in fams["ember_sched_jobs"] if l["state"] == state)
            assert got == n, "ember_sched_jobs{state=%s}: %s, status says %s" % (state, got, n)
        assert value(fams, "ember_sched_jobs", state="running", team="vision") == 2
        assert value(fams, "ember_sched_jobs", state="done", team="vision") == 1
        assert value(fams, "ember_sched_jobs", state="queued", team="speech") == 1
        # Teams: each line of `status --teams` is "TEAM SHARE HELD QUEUED RUNNING COMPLETED ...".
        for line in teams.splitlines()[1:]:
            f = line.split()
            if len(f) < 6 or f[0] not in ("vision", "speech"):
                continue
            assert value(fams, "ember_sched_team_quota_devices", team=f[0]) == int(f[1]), line
            assert value(fams, "ember_sched_team_devices_in_use", team=f[0]) == int(f[2]), line
            assert value(fams, "ember_sched_team_usage_ratio", team=f[0]) == int(f[2]) / int(f[1]), line
            queued = sum(v for l, v in fams["ember_sched_jobs"] if l == {"state": "queued", "team": f[0]})
            assert queued == int(f[3]), line
            count = [v for l, v in fams.get("ember_sched_job_completion_seconds_count", []) if l["team"] == f[0]]
            assert (count[0] if count else 0) == int(f[5]), line
        # Preemptions, against the PREEMPT column.
        assert value(fams, "ember_sched_preemptions_total", team="vision") == sum(
            j["preemptions"] for n, j in jobs.items() if not n.startswith("speech"))
        # Admission: every job in the table admitted, the stranger refused.
        assert value(fams, "ember_sched_admission_decisions_total", decision="admitted") == len(jobs) == 5
        assert value(fams, "ember_sched_admission_decisions_total", decision="rejected") == 1
        # Queue waits: one per start (the preempted job started twice), cumulative buckets ending at +Inf.
        assert value(fams, "ember_sched_queue_wait_seconds_count", team="vision") == 4
        buckets = [v for l, v in fams["ember_sched_queue_wait_seconds_bucket"] if l["team"] == "vision"]
        assert buckets == sorted(buckets) and buckets[-1] == 4, buckets
        # The held job's own report, and the socket's request latency.
        held = str(jobs["held"]["id"])
        assert value(fams, "ember_sched_job_samples_per_second", job_id=held, name="held", team="vision") == 2048.5
        assert value(fams, "ember_sched_job_epoch", job_id=held, name="held", team="vision") == 3
        assert value(fams, "ember_sched_job_loss", job_id=held, name="held", team="vision") == 0.125
        assert value(fams, "ember_sched_request_duration_seconds_count", request="submit") == 6
        assert value(fams, "ember_sched_info", policy="fcfs+quota") == 1
        for gate in ("gate-held", "gate-pre", "gate-speech", "gate-waits"):
            d.open_gate(gate)
    print("metrics_check: /metrics parsed by prometheus_client agrees with ember sched status (job %d done)" % done)


if __name__ == "__main__":
    main(*sys.argv[1:])
