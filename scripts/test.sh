#!/usr/bin/env bash
# The whole test run: install the system packages the tests drive when they are missing
# (Debian's chromium for the dashboard, nats-server for the multi-host transport), build, then
# every test file with Node's test runner, and beside it lint, the formatter's check, the cast
# budget and the type-check.
#
# RANKSCOPE_TESTS_ONLY=1 skips the build and the checks (none of them depends on the Node.js
# version): .ci/run runs them once, then the tests under each Node major. dist/ must be built.
# RANKSCOPE_TEST_CONCURRENCY: test files run at once (default twice the cores, at most 8: most files
# wait on servers, processes and deadlines much of their time, so two per core keep both cores busy;
# CONTRIBUTING.md, "How long the suite takes").
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh

# The checks run beside the build and the tests (they need no dist/ and change nothing): the build
# is one process on one core, and the tests spend much of their time waiting, so the checks' minute
# of CPU fits in both. Their output is printed once the tests are done, and a failed check fails
# the run. tsc keeps its incremental state in node_modules/.cache (exact: it re-checks what a
# change reaches), so a second run type-checks only what changed.
checks_pid=""
checks_log=""
if [ "${RANKSCOPE_TESTS_ONLY:-}" = 1 ]; then
  [ -f dist/index.js ] || { echo "RANKSCOPE_TESTS_ONLY=1: dist/ is not built (npm run build)" >&2; exit 1; }
else
  checks_log=$(mktemp)
  (
    set -e
    npx eslint .
    # Code is laid out by Prettier (.prettierrc.json); `npm run format` rewrites what this refuses.
    npx prettier --check --cache --cache-strategy content --log-level warn .
    # Type assertions per 1,000 lines of src may only go down (docs/DESIGN.md, "Types, casts and lint").
    node scripts/count-casts.mjs --max-per-1000 0.9
    npx tsc -p tsconfig.json --noEmit --incremental --tsBuildInfoFile node_modules/.cache/rankscope-tsc/check.tsbuildinfo
  ) >"$checks_log" 2>&1 &
  checks_pid=$!
  if ! npm run build --silent; then
    wait "$checks_pid" || true
    cat "$checks_log"
    rm -f "$checks_log"
    echo "── the build FAILED (above)" >&2
    exit 1
  fi
fi

# Arguments narrow the test files to those folders or files (`npm test -- test/backends/store`;
# test/ mirrors src/, CONTRIBUTING.md).
mapfile -t found < <(find "${@:-test}" -name '*.test.ts' | sort)
if [ "${#found[@]}" -eq 0 ]; then
  echo "no *.test.ts under: ${*:-test}" >&2
  exit 1
fi
# The longest files start first (scripts/slow-tests.txt, longest first; CONTRIBUTING.md, "How long
# the suite takes"), so none of them starts last and runs alone at the end; the rest in name order.
mapfile -t slow < <(grep -v '^#' scripts/slow-tests.txt | grep -v '^$')
files=()
for f in "${slow[@]}"; do
  for g in "${found[@]}"; do [ "$g" = "$f" ] && files+=("$f"); done
done
for g in "${found[@]}"; do
  case " ${slow[*]} " in *" $g "*) ;; *) files+=("$g") ;; esac
done
# The files run in this order under scripts/run-tests.mjs (node:test's run()): `node --test FILES`
# sorts them by name, which ran the dashboard's long Chromium files (test/ui/…) last. No
# forceExit: it makes the runner exit before it has read the last file's results, which are then
# dropped from the count at exit code 0 (nodejs/node#64833). A file left hanging by what a test
# leaves open instead ends the whole run after RANKSCOPE_TEST_LIMIT_S (40 minutes), loudly (exit
# code 124). Each test's timeout (600 s) is a guard against a hang, not a speed bound: a long file
# on a machine loaded many times over took more than 180 s.
# Each file runs under the tests' TypeScript loader (scripts/ts-loader.mjs), which it takes from the
# runner's flags. RANKSCOPE_TEST_TIMES=FILE also writes each file's time there, longest first
# (scripts/file-times.mjs); RANKSCOPE_TEST_CPU=FILE each file's CPU seconds, start and end
# (scripts/file-cpu.mjs; `node scripts/file-timeline.mjs FILE` lays them out).
preload=(--import "$PWD/scripts/ts-loader.mjs")
if [ -n "${RANKSCOPE_TEST_CPU:-}" ]; then
  : >"$RANKSCOPE_TEST_CPU"
  preload+=(--import "$PWD/scripts/file-cpu.mjs")
fi
cores=$(nproc 2>/dev/null || echo 2)
concurrency=$((cores * 2 > 8 ? 8 : cores * 2))
status=0
timeout --kill-after=30 "${RANKSCOPE_TEST_LIMIT_S:-2400}" node "${preload[@]}" scripts/run-tests.mjs \
  "${RANKSCOPE_TEST_CONCURRENCY:-$concurrency}" 600000 "${files[@]}" || status=$?
if [ -n "$checks_pid" ]; then
  echo "── the checks (eslint, prettier, the cast budget, tsc):"
  if wait "$checks_pid"; then
    cat "$checks_log"
    echo "── the checks passed"
  else
    cat "$checks_log"
    echo "── the checks FAILED (above)" >&2
    [ "$status" -ne 0 ] || status=1
  fi
  rm -f "$checks_log"
fi
exit "$status"
