#!/usr/bin/env bash
# scripts/setup.sh: the main job's set (`setup.sh main`) holds what building the examples needs and
# none of the test suite's services or heavy libraries; the full set disables, for the next boot,
# exactly the services whose packages it installs itself, and leaves one the machine had alone.
# dpkg-query and apt-get are stand-ins on PATH: the first says which packages are "installed", the
# second refuses to run, so nothing on the machine changes.
set -u
script="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
cat >"$work/bin/dpkg-query" <<'STUB'
#!/bin/sh
# dpkg-query -W -f=... PACKAGE: "installed" for the packages named in STUB_INSTALLED
for p in $STUB_INSTALLED; do [ "$p" = "$3" ] && { echo installed; exit 0; }; done
exit 1
STUB
# Should the script ever install for real here, it fails at once instead.
printf '#!/bin/sh\necho "apt-get $*" >>"%s/apt.log"\nexit 1\n' "$work" >"$work/bin/apt-get"
chmod +x "$work/bin/dpkg-query" "$work/bin/apt-get"
fail() { echo "FAIL: $*"; exit 1; }
run() {  # run MODE INSTALLED...: the dry run's two lines
  STUB_INSTALLED="${*:2}" EMBER_SETUP_DRY_RUN=1 PATH="$work/bin:$PATH" bash "$script" "$1"
}

out=$(run main) || fail "setup.sh main exited $?"
installs=$(sed -n 's/.*would install: //p' <<<"$out")
for p in cmake ninja-build g++ libopenblas-openmp-dev libprotobuf-dev protobuf-compiler zlib1g-dev \
  libstb-dev dataset-fashion-mnist; do
  grep -qw -- "$p" <<<"$installs" || fail "main set lacks $p: $installs"
done
for p in slurmctld slurmd munge libtorch-dev libopenmpi-dev coinor-libcbc-dev clang libgtest-dev python3-venv; do
  grep -qw -- "$p" <<<"$installs" && fail "main set installs $p, which only the tests need"
done
grep -q "would disable: nothing" <<<"$out" || fail "main set disables a service: $out"

out=$(run all) || fail "setup.sh all exited $?"
grep -q "would disable: munge slurmctld slurmd$" <<<"$out" || fail "all set must disable the three services: $out"
grep -qw slurmd <<<"$(sed -n 's/.*would install: //p' <<<"$out")" || fail "all set lacks slurmd"

out=$(run all munge) || fail "setup.sh all exited $?"
grep -q "would disable: slurmctld slurmd$" <<<"$out" || fail "a munge the machine had must be left alone: $out"

bash "$script" nonsense 2>"$work/err" && fail "an unknown set must be refused"
grep -q "usage: scripts/setup.sh \[main|all\]" "$work/err" || fail "no usage line: $(cat "$work/err")"
echo "setup.sh: main set lean, services of installed packages disabled"
