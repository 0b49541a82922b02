#!/usr/bin/env bash
# The whole test run: install the system packages the tests drive when they are missing
# (Debian's chromium for the dashboard, nats-server for the multi-host transport), build,
# lint, the formatter's check, the cast budget, type-check, then every test file with Node's test runner.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-system-deps.sh

npm run build --silent
npx eslint .
# Code is laid out by Prettier (.prettierrc.json); `npm run format` rewrites what this refuses.
npx prettier --check --cache --cache-strategy content --log-level warn .
# Type assertions per 1,000 lines of src may only go down (docs/DESIGN.md, "Types, casts and lint").
node scripts/count-casts.mjs --max-per-1000 0.9
npx tsc -p tsconfig.json --noEmit

# Arguments narrow the test files to those folders or files (`npm test -- test/backends/store`;
# test/ mirrors src/, CONTRIBUTING.md).
mapfile -t files < <(find "${@:-test}" -name '*.test.ts' | sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "no *.test.ts under: ${*:-test}" >&2
  exit 1
fi
# --test-force-exit: a file whose test timed out ends (its exit drains run: a test's PostgreSQL is
# killed and its folder removed) instead of waiting forever on what the test left open.
exec npx tsx --test --test-reporter=spec --test-concurrency=2 --test-timeout=180000 --test-force-exit "${files[@]}"
