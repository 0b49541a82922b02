#!/usr/bin/env bash
# Debian packages the tests need, installed only when missing. Skips with a note (and the tests
# that need them fail with a clear message) when not root or apt-get is unavailable.
set -uo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
# The multi-host tests make network namespaces and veth pairs (ip) and cut links (ip, tc).
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# The team server's tests start a real PostgreSQL (Debian's, run as the postgres user).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# Two team servers behind a real load balancer (test/server/balancer.test.ts).
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
# The Python cross-checks (TensorBoard, the official W&B SDK) make a venv: python3 with venv and pip.
python3 -c "import venv, ensurepip" >/dev/null 2>&1 || missing+=(python3-venv)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "rankscope tests: missing ${missing[*]}; install them (Debian: apt-get install ${missing[*]})" >&2
  exit 0
fi
echo "rankscope tests: installing ${missing[*]} from Debian's packages" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
  || echo "rankscope tests: could not install ${missing[*]}" >&2
