#!/usr/bin/env bash
# Crash consistency at random moments: kills a training program with SIGKILL at random times
# (during start-up, training steps and checkpoint writes alike), resumes it each time with
# --resume auto, and checks that
#   - after every kill, every checkpoint in its folder reads back (checksums included), and
#   - when a series of killed and resumed runs ends, its last checkpoint is bit-identical
#     (parameters, buffers, optimizer states, position) to that of one uninterrupted run.
# The program checkpoints every step (--checkpoint-every 1), so most kills fall between or inside
# checkpoint writes. Each kill lands at a uniformly random moment within the uninterrupted run's
# wall time; when a series finishes before KILLS kills, another series starts afresh.
# usage: kill_resume.sh CKPT_VERIFY KILLS SEED -- PROGRAM ARGS...
set -uo pipefail
verify=$1 wanted=$2 seed=$3
shift 3
[[ ${1:-} == -- ]] && shift
work=$(mktemp -d "${TMPDIR:-/tmp}/ember-kill-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "kill_resume: FAILED: $*"
  exit 1
}

t0=$(date +%s%N)
"$@" --checkpoint-dir "$work/reference" --checkpoint-every 1 >"$work/reference.log" 2>&1 || {
  cat "$work/reference.log"
  fail "the uninterrupted run failed"
}
wall_ms=$((($(date +%s%N) - t0) / 1000000))
((wall_ms > 0)) || wall_ms=1
RANDOM=$seed
kills=0 in_write=0 series=0
while ((kills < wanted)); do
  series=$((series + 1))
  dir=$work/series$series
  attempts=0
  while :; do
    attempts=$((attempts + 1))
    ((attempts < 10000)) || fail "series $series never finished"
    "$@" --checkpoint-dir "$dir" --checkpoint-every 1 --resume auto >>"$work/series$series.log" 2>&1 &
    pid=$!
    delay_ms=$(((RANDOM * 32768 + RANDOM) % wall_ms))
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if ((kills < wanted)) && kill -9 "$pid" 2>/dev/null; then
      wait "$pid" 2>/dev/null
      kills=$((kills + 1))
      # A temporary beside last.ckpt: the kill interrupted a checkpoint write (the next run
      # removes it).
      compgen -G "$dir/.last.ckpt.tmp.*" >/dev/null && in_write=$((in_write + 1))
      for f in "$dir"/*.ckpt; do
        [[ -e $f ]] || continue
        "$verify" read "$f" || fail "after kill $kills, $f does not read back"
      done
      continue
    fi
    wait "$pid"
    status=$?
    if ((status != 0)); then
      tail -20 "$work/series$series.log"
      fail "series $series: a resumed run exited with status $status"
    fi
    break
  done
  "$verify" same "$work/reference/last.ckpt" "$dir/last.ckpt" ||
    fail "series $series ($attempts runs) ended with a different checkpoint than the uninterrupted run"
  leftovers=$(compgen -G "$dir/.*.tmp.*" | wc -l)
  ((leftovers == 0)) || fail "series $series left $leftovers temporary file(s) behind: $(compgen -G "$dir/.*.tmp.*" | xargs -n1 basename | tr "\n" " ")"
done
echo "kill_resume: $kills kill(s) at random moments ($in_write inside a checkpoint write) over $series series;" \
  "every checkpoint read back after every kill; each series ended bit-identical to the uninterrupted run" \
  "(${wall_ms} ms)"
