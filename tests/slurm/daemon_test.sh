#!/usr/bin/env bash
# daemon_test.sh EMBER SCHED_TRAINER SOURCE_DIR: `ember sched serve --backend slurm` on a real Slurm
# (slurm_cluster.sh): Ember's queue and policy, Slurm's node. A training job (sched_trainer:
# checkpoints on SIGTERM, resumes with --resume auto) runs to the end; one preempted through
# `ember sched preempt` checkpoints, is started again as a new Slurm job and ends with exactly the
# parameters of an uninterrupted run; the daemon killed mid-run and started again finds its job in
# Slurm and follows it to the end; a job that fails on the node is reported with Slurm's reason.
set -u
ember=$1 trainer=$2 src=$(cd "$3" && pwd)
. "$src/tests/slurm/slurm_cluster.sh"
work=$(mktemp -d)
slurm_up "$work/slurm"
daemon=
trap '[ -n "$daemon" ] && kill -KILL $daemon 2>/dev/null; slurm_down; rm -rf "$work"' EXIT
cd "$work" || exit 1
state=$work/state
fail() {
  echo "FAIL: $*"
  echo "== daemon" && cat "$work/daemon.out"
  for f in "$state"/jobs/*/output.log; do echo "== $f" && cat "$f"; done
  tail -n 20 "$work"/slurm/log/*.log
  exit 1
}
start_daemon() {
  "$ember" sched serve --backend slurm --state "$state" --policy fcfs --grace 20 >>"$work/daemon.out" 2>&1 &
  daemon=$!
  for _ in $(seq 100); do "$ember" sched status --state "$state" >/dev/null 2>&1 && return 0; sleep 0.1; done
  fail "the daemon did not come up"
}
sched() { "$ember" sched "$1" --state "$state" "${@:2}"; }
job_state() { sched status --job "$1" | sed -n 's/^job [0-9]* ([^)]*): \([a-z]*\)$/\1/p'; }
wait_state() {  # wait_state ID STATE SECONDS
  for _ in $(seq $(($3 * 10))); do [ "$(job_state "$1")" = "$2" ] && return 0; sleep 0.1; done
  fail "job $1 is $(job_state "$1"), not $2, after $3 s"
}
submit() { sched submit "$@" | sed -n 's/^submitted job \([0-9]*\).*/\1/p'; }
trainer_job() {  # trainer_job NAME STEPS GATE_STEP
  submit --name "$1" --devices 1 --workdir "$work" -- "$trainer" --steps "$2" --checkpoint-every 4 \
    --checkpoint-dir "$work/ckpt-$1" --resume auto --out "$work/$1.txt" --gate "$work/gate-$1" --gate-step "$3"
}

start_daemon
grep -q "on 1 Slurm node(s): ember0" "$work/daemon.out" || fail "the daemon's pool is not the Slurm node"
"$trainer" --steps 12 --out "$work/reference.txt" >/dev/null || fail "the reference run failed"

# 1. Preempted through its checkpoint, started again as a new Slurm job, identical at the end.
a=$(trainer_job a 12 6)
[ -n "$a" ] || fail "submit refused the job"
wait_state "$a" running 30
first=$(sched status --job "$a" | sed -n 's/^  slurm job: *//p')
[ -n "$first" ] || fail "job $a has no Slurm job"
scontrol show job "$first" | grep -q "JobName=ember-$a-1" || fail "Slurm job $first is not named after job $a"
for _ in $(seq 300); do grep -q "waiting for gate at step 6" "$state/jobs/$a/output.log" 2>/dev/null && break; sleep 0.1; done
sched preempt --job "$a" >/dev/null || fail "preempt refused"
for _ in $(seq 300); do sched status --job "$a" | grep -q "preemptions: 1" && break; sleep 0.1; done
sched status --job "$a" | grep -q "preemptions: 1" || fail "job $a was not preempted"
touch "$work/gate-a"
wait_state "$a" done 120
second=$(sched status --job "$a" | sed -n 's/^  slurm job: *//p')
[ "$second" != "$first" ] || fail "job $a was not started again as a new Slurm job"
grep -q "resumed from step 6" "$state/jobs/$a/output.log" || fail "job $a did not resume from its checkpoint"
cmp -s "$work/a.txt" "$work/reference.txt" || fail "job $a's parameters differ from an uninterrupted run's"

# 2. The daemon killed mid-run and started again finds its job in Slurm.
b=$(trainer_job b 8 3)
wait_state "$b" running 30
for _ in $(seq 300); do grep -q "waiting for gate at step 3" "$state/jobs/$b/output.log" 2>/dev/null && break; sleep 0.1; done
kill -KILL $daemon
wait $daemon 2>/dev/null
start_daemon
grep -q "re-adopted Slurm job" "$work/daemon.out" || fail "the new daemon did not re-adopt job $b"
[ "$(job_state "$b")" = running ] || fail "job $b is $(job_state "$b") after the daemon's restart"
touch "$work/gate-b"
wait_state "$b" done 120
sched status --job "$b" | grep -q "run time:.* over 1 start(s)" || fail "job $b was started twice"

# 3. A job that fails on the node: Slurm's state in the reason.
c=$(submit --name c --devices 1 --workdir "$work" -- sh -c 'echo failing; exit 3')
wait_state "$c" failed 60
sched status --job "$c" | grep -q "reason: .*exit 3.*Slurm job [0-9]*: FAILED" || fail "job $c's failure lacks Slurm's state"
echo PASS
