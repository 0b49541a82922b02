#!/usr/bin/env bash
# Runs docs/scale.md's three-level Slurm example ("Three levels: rack agents under Slurm and
# Kubernetes") as written, on a small Slurm cluster made on this machine, against the packed
# package, and checks every logged number. A manual check (not part of npm test): needs root,
# network namespaces (iproute2) and nats-server; installs Debian's slurm-wlm and munge with apt-get
# when they are missing. Prints "skipped: <why>" and exits 0 where it cannot run.
#
#   sudo bash scripts/slurm-check.sh                       # 4 nodes x 2 ranks, 2 racks, 4 steps
#   sudo CHECK_KILL_AFTER=1 bash scripts/slurm-check.sh    # and rack1's agent killed with -9 after step 1
#   sudo CHECK_EXAMPLE=two bash scripts/slurm-check.sh     # the two-level example ("### Slurm") instead
#
# The cluster: slurmctld in this namespace at 10.213.9.1 on a bridge rs-slurm-br; four nodes
# rs-slurm-n1..4, each a network namespace (10.213.9.11..14, a veth on the bridge) whose slurmd runs
# in a UTS namespace of its own with the node's name as host name, so every node has its own
# address and `hostname -s` (Debian's slurmd is built without multiple-slurmd: one node name per
# host). Its own slurm.conf (SLURM_CONF), spool, logs and ports (6917/6918) under a temporary
# folder, so a system Slurm is left alone; /etc/hosts gets the node names (lines marked
# "# rankscope slurm-check", removed at the end). Everything it made is removed at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STEPS=${CHECK_STEPS:-4}
EXAMPLE=${CHECK_EXAMPLE:-three}
case $EXAMPLE in
  three) HEADING='^### Three levels' ;;
  two) HEADING='^### Slurm$' ;;
  *) echo "CHECK_EXAMPLE is three or two" >&2; exit 2 ;;
esac
skip() { echo "skipped: $*"; exit 0; }

[[ $(uname -s) == Linux ]] || skip "Linux only"
[[ $(id -u) == 0 ]] || skip "run as root (network namespaces, slurmd, munged)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v nats-server >/dev/null || skip "nats-server is not installed (scripts/install-system-deps.sh)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null || skip "Slurm is not installed and there is no apt-get"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends slurm-wlm munge >/dev/null ||
    skip "apt-get could not install slurm-wlm and munge"
fi
ip netns add rs-slurm-probe 2>/dev/null || skip "cannot create network namespaces here"
ip netns del rs-slurm-probe

WORK=$(mktemp -d -t rankscope-slurm-check.XXXXXX)
export SLURM_CONF=$WORK/slurm.conf
PIDS=()
cleanup() {
  set +e
  scancel --full "${JOB:-0}" 2>/dev/null
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  sleep 1
  for n in 1 2 3 4; do ip netns del rs-slurm-n$n 2>/dev/null; ip link del rs-slurm-v$n 2>/dev/null; done
  ip link del rs-slurm-br 2>/dev/null
  sed -i '/# rankscope slurm-check$/d' /etc/hosts
  echo "kept: $WORK (the job's output, run and Slurm logs)"
}
trap cleanup EXIT

# Munge: the running munged, or one of our own.
if ! munge -n </dev/null >/dev/null 2>&1; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  [[ -s /etc/munge/munge.key ]] || { mungekey --create 2>/dev/null || create-munge-key; chown munge:munge /etc/munge/munge.key; }
  runuser -u munge -- munged --pid-file="$WORK/munged.pid"
  sleep 1
  PIDS+=("$(cat "$WORK/munged.pid")")
fi

# The nodes.
ip link add rs-slurm-br type bridge
ip addr add 10.213.9.1/24 dev rs-slurm-br
ip link set rs-slurm-br up
for n in 1 2 3 4; do
  ip netns add rs-slurm-n$n
  ip link add rs-slurm-v$n type veth peer name rs-slurm-e$n
  ip link set rs-slurm-e$n netns rs-slurm-n$n
  ip link set rs-slurm-v$n master rs-slurm-br
  ip link set rs-slurm-v$n up
  ip -n rs-slurm-n$n addr add 10.213.9.1$n/24 dev rs-slurm-e$n
  ip -n rs-slurm-n$n link set rs-slurm-e$n up
  ip -n rs-slurm-n$n link set lo up
  echo "10.213.9.1$n rs-slurm-n$n # rankscope slurm-check" >>/etc/hosts
done

mkdir -p "$WORK/state" "$WORK/spool" "$WORK/log"
cat >"$SLURM_CONF" <<CONF
ClusterName=rscheck
SlurmctldHost=$(hostname -s)(10.213.9.1)
SlurmctldPort=6917
SlurmdPort=6918
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool/%n
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd-%n.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd-%n.log
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=rs-slurm-n[1-4] NodeAddr=10.213.9.[11-14] CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=check Nodes=rs-slurm-n[1-4] Default=YES MaxTime=30 State=UP
CONF
slurmctld -i -f "$SLURM_CONF"
sleep 1
PIDS+=("$(cat "$WORK/slurmctld.pid")")
for n in 1 2 3 4; do
  # nsenter, not `ip netns exec`: that remounts /sys, where slurmd looks for cgroups
  setsid nsenter --net=/run/netns/rs-slurm-n$n unshare --uts \
    sh -c "hostname rs-slurm-n$n && exec slurmd -D -f '$SLURM_CONF'" >"$WORK/log/slurmd-$n.out" 2>&1 </dev/null &
  PIDS+=("$!")
done
for _ in $(seq 60); do
  [[ $(sinfo -h -t idle -o %D 2>/dev/null) == 4 ]] && break
  sleep 1
done
[[ $(sinfo -h -t idle -o %D) == 4 ]] || { sinfo -N; echo "the nodes did not come up"; exit 1; }
echo "Slurm $(slurmctld -V | cut -d' ' -f2): $(sinfo -h -N -o '%N' | tr '\n' ' ')idle"

# The job's project: the packed package, as a user installs it.
(cd "$ROOT" && npm run build --silent && npm pack --ignore-scripts --silent --pack-destination "$WORK" >/dev/null)
mkdir "$WORK/job" && cd "$WORK/job"
npm init -y >/dev/null && npm pkg set type=module
npm install --silent --no-audit --no-fund "$WORK"/rankscope-*.tgz @nats-io/transport-node@~3.3.1
cp "$ROOT/scripts/slurm-check/controller.mjs" controller.js
cp "$ROOT/scripts/slurm-check/train.mjs" train.js
# The docs' batch script, byte for byte: the first bash block under its heading.
awk -v heading="$HEADING" '$0 ~ heading { f = 1 } f && /^```bash$/ { g = 1; next } g && /^```$/ { exit } g' "$ROOT/docs/scale.md" >job.sbatch
grep -q '^#SBATCH' job.sbatch || { echo "no batch script found in docs/scale.md"; exit 1; }

# 4 nodes x 2 ranks (the nodes' 2 CPUs each, as the docs' 16 on 16-CPU nodes), racks of 2 nodes.
export CHECK_STEPS=$STEPS PER_RACK=2
JOB=$(sbatch --parsable --nodes=4 --ntasks-per-node=2 --time=5 -o job.out job.sbatch)
echo "job $JOB submitted"
while squeue -h -j "$JOB" 2>/dev/null | grep -q .; do
  if [[ -e sync/kill && ! -e sync/killed ]]; then
    # rack1's agent (its node process, not the loop around it: found by its environment), killed:
    # the docs' loop starts another
    for pid in $(pgrep -x node); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'RANKSCOPE_RACK_ID=rack1' &&
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'dist/transport/rack/main.js'; then
        kill -9 "$pid" && echo "killed rack1's agent (pid $pid) with -9"
      fi
    done
    touch sync/killed
  fi
  sleep 0.5
done
echo "--- job output (without nats-server's)"
grep -v '^\[[0-9]*\] [0-9/]* [0-9:.]* \[' job.out || true
echo "---"

# The checks: what the job's output and its metrics.jsonl say.
node - "$WORK/job" "$EXAMPLE" <<'CHECK'
const { readFileSync } = require("node:fs");
const [dir, example] = process.argv.slice(2);
const out = readFileSync(`${dir}/job.out`, "utf8");
const result = JSON.parse(readFileSync(`${dir}/sync/result.json`, "utf8"));
const problems = [];
const count = (re) => (out.match(re) ?? []).length;
const nodes = [1, 2, 3, 4].map((n) => `rs-slurm-n${n}`);
if (example === "three" && (count(/^rack agent rack0 ready$/gm) < 1 || count(/^rack agent rack1 ready$/gm) < 1)) problems.push("a rack agent never said ready");
for (const node of nodes) if (count(new RegExp(`^host agent ${node} ready$`, "gm")) !== 1) problems.push(`host agent ${node} did not say ready once`);
const serves = example === "three" ? ["rack0", "rack1"] : nodes;
if (JSON.stringify(result.served) !== JSON.stringify(serves)) problems.push(`the controller serves ${result.served}, not ${serves}`);
const runDir = out.match(/this run's data is in (\S+)/)?.[1];
const lines = readFileSync(`${runDir}/metrics.jsonl`, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const at = (key, step) => lines.find((l) => l.key === key && l.step === step)?.value;
const { world, steps } = result;
let logged = 0;
for (const f of result.flushes) {
  const loss = at("loss", f.step);
  const tokens = at("tokens", f.step);
  logged += tokens ?? 0;
  if (f.exact && (loss !== f.want.loss || tokens !== f.want.tokens))
    problems.push(`step ${f.s} (flush ${f.step}): metrics.jsonl has loss ${loss}, tokens ${tokens}; the ranks recorded mean ${f.want.loss}, sum ${f.want.tokens}`);
  console.log(`flush(${f.step})${f.s === undefined ? "" : ` step ${f.s}`}: metrics.jsonl loss ${loss}, tokens ${tokens}` +
    (f.want === undefined ? "" : `; recorded mean ${f.want.loss}, sum ${f.want.tokens}`) +
    (f.complete ? (f.exact ? " — exact" : " — complete, with values carried from the flush before") : ` — missing ${f.missing.length} ranks`));
}
let recorded = 0;
for (let s = 0; s < steps; s++) recorded += (world * (world - 1)) / 2 + world * s;
if (logged !== recorded) problems.push(`tokens logged over the run ${logged}, recorded ${recorded}`);
console.log(`${world} ranks, ${steps} steps: tokens recorded ${recorded}, logged ${logged}; the controller served ${result.served.join(", ")}; frames it took ${result.stats.frames}`);
for (const p of result.places) console.log(`  ${p.id}: ${p.ranks.join(" ")}`);
if (problems.length > 0) {
  console.log(`FAILED:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`OK: every number logged is what the ranks recorded, through ${example === "three" ? "rack and host agents" : "host agents"}`);
CHECK
