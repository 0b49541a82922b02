/**
 * docs/scale.md's Kubernetes manifests ("Launching a job on many machines"), checked without a
 * cluster: each parses, is a complete Job, DaemonSet or StatefulSet (what the API server requires:
 * `apiVersion`, a name, a selector matching the pod labels, an image, a Job's `restartPolicy`, an
 * indexed Job's `completions`), sets only variables the agents and `joinRun` read, takes the run
 * secret from the Secret the page creates, runs files the package has (`dist/…/main.js` is built
 * from `src/…/main.ts`), and its `sh -c` lines — after Kubernetes' own `$(VAR)` expansion — give
 * a dotted node name a host id (and rack id) that is a subject token.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../../helpers.js";

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}
interface Container {
  name: string;
  image?: string;
  command?: string[];
  env?: EnvVar[];
}
interface Manifest {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string };
  spec?: {
    completionMode?: string;
    completions?: number;
    selector?: { matchLabels?: Record<string, string> };
    template?: {
      metadata?: { labels?: Record<string, string> };
      spec?: { restartPolicy?: string; containers?: Container[] };
    };
  };
}

/** A parsed YAML document that is an object: its fields are checked one by one below. */
function isManifest(value: unknown): value is Manifest {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

const page = readFileSync(join(REPO_ROOT, "docs/scale.md"), "utf8");
const manifests: Manifest[] = [...page.matchAll(/```yaml\n([\s\S]*?)```/g)].flatMap((block) =>
  parseAllDocuments(block[1] ?? "").map((doc) => {
    assert.deepEqual(doc.errors, [], `docs/scale.md's YAML parses:\n${block[1]}`);
    const manifest: unknown = doc.toJS();
    assert.ok(isManifest(manifest), "each YAML document is a manifest (an object)");
    return manifest;
  }),
);
const containers = manifests.flatMap((m) =>
  (m.spec?.template?.spec?.containers ?? []).map((c) => ({ manifest: m, container: c })),
);

/** Every `"NAME"` string literal of src/transport and src/core: the variables the processes read. */
function variablesRead(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts"))
        for (const m of readFileSync(path, "utf8").matchAll(/"(RANKSCOPE_[A-Z_]+|RANK)"/g)) names.add(m[1] ?? "");
    }
  };
  walk(join(REPO_ROOT, "src/transport"));
  walk(join(REPO_ROOT, "src/core"));
  return names;
}

/** Kubernetes' expansion of `command`: `$(NAME)` of a container variable is replaced, `$$` is `$`, anything else stays. */
function kubernetesExpand(text: string, names: ReadonlySet<string>, value: string): string {
  return text.replace(/\$\$|\$\(([^)]*)\)/g, (match: string, name: string | undefined) =>
    match === "$$" ? "$" : name !== undefined && names.has(name) ? value : match,
  );
}

test("docs/scale.md's Kubernetes manifests are complete Jobs, DaemonSets and StatefulSets", () => {
  const kinds = manifests.map((m) => `${m.kind}/${m.metadata?.name}`);
  for (const kind of [
    "Job/rankscope-controller",
    "DaemonSet/rankscope-agent",
    "Job/rankscope-ranks",
    "StatefulSet/rankscope-rack",
  ])
    assert.ok(kinds.includes(kind), `the page shows ${kind} (it shows ${kinds.join(", ")})`);
  for (const m of manifests) {
    const what = `${m.kind}/${m.metadata?.name}`;
    assert.equal(m.apiVersion, m.kind === "Job" ? "batch/v1" : "apps/v1", `${what}: apiVersion`);
    if (m.kind !== "Job") {
      const selector = m.spec?.selector?.matchLabels;
      assert.ok(selector !== undefined, `${what} has a selector`);
      assert.deepEqual(m.spec?.template?.metadata?.labels, selector, `${what}: its pods carry its selector's labels`);
    } else {
      assert.ok(["Never", "OnFailure"].includes(m.spec?.template?.spec?.restartPolicy ?? ""), `${what}: restartPolicy`);
      if (m.spec?.completionMode === "Indexed") assert.ok(m.spec.completions !== undefined, `${what}: completions`);
    }
    const listed = m.spec?.template?.spec?.containers ?? [];
    assert.ok(listed.length > 0, `${what} has containers`);
    for (const c of listed)
      assert.ok(c.image !== undefined && c.command !== undefined, `${what}/${c.name}: image, command`);
  }
});

test("the manifests set only variables rankscope reads, the secret the page creates, and files the package has", () => {
  const read = variablesRead();
  const secret = /kubectl create secret generic (\S+) --from-file=(\w+)=/.exec(page);
  assert.ok(secret !== null, "the page says how to create the run secret");
  for (const { manifest, container } of containers) {
    const what = `${manifest.kind}/${manifest.metadata?.name}/${container.name}`;
    const command = (container.command ?? []).join(" ");
    const set = [
      ...(container.env ?? []).map((e) => e.name),
      ...[...command.matchAll(/(RANKSCOPE_[A-Z_]+)=/g)].map((m) => m[1] ?? ""),
    ];
    for (const name of set.filter((n) => n.startsWith("RANKSCOPE_") || n === "RANK"))
      assert.ok(read.has(name), `${what} sets ${name}, which nothing in src/ reads`);
    for (const name of ["RANKSCOPE_NATS_URL", "RANKSCOPE_RUN_ID", "RANKSCOPE_RUN_SECRET"])
      assert.ok(set.includes(name), `${what} sets ${name}`);
    const ref = container.env?.find((e) => e.name === "RANKSCOPE_RUN_SECRET")?.valueFrom?.secretKeyRef;
    assert.deepEqual(
      ref,
      { name: secret[1], key: secret[2] },
      `${what}: the run secret comes from the Secret the page creates`,
    );
    for (const m of command.matchAll(/node_modules\/rankscope\/dist\/(\S+)\.js/g))
      assert.ok(
        existsSync(join(REPO_ROOT, "src", `${m[1]}.ts`)),
        `${what} runs dist/${m[1]}.js, built from src/${m[1]}.ts`,
      );
  }
  const agents = containers.map(({ container }) => (container.command ?? []).join(" "));
  assert.ok(
    agents.some((c) => c.includes("dist/transport/host/main.js")),
    "a host agent",
  );
  assert.ok(
    agents.some((c) => c.includes("dist/transport/rack/main.js")),
    "a rack agent",
  );
});

test("the manifests' sh -c lines make a dotted node name a host id and rack id", () => {
  const token = /^[A-Za-z0-9_-]{1,128}$/;
  let lines = 0;
  for (const { manifest, container } of containers) {
    const [shell, flag, line] = container.command ?? [];
    if (shell !== "sh" || flag !== "-c" || line === undefined) continue;
    lines++;
    const names = new Set((container.env ?? []).map((e) => e.name));
    const run = kubernetesExpand(line, names, "from-the-cluster").replace(/exec node \S+/, "exec env");
    const env = execFileSync("sh", ["-c", run], {
      env: { PATH: process.env["PATH"], NODE: "ip-10-0-1-2.ec2.internal" },
      encoding: "utf8",
    });
    const values = Object.fromEntries(
      env.split("\n").map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    const what = `${manifest.kind}/${manifest.metadata?.name}`;
    assert.equal(values["RANKSCOPE_HOST_ID"], "ip-10-0-1-2_ec2_internal", `${what}: the host id`);
    if (line.includes("RANKSCOPE_RACK_ID="))
      assert.match(
        values["RANKSCOPE_RACK_ID"] ?? "",
        /^rankscope-rack-([0-9]|[12][0-9]|3[01])$/,
        `${what}: one of the 32 racks`,
      );
    for (const [name, value] of Object.entries(values))
      if (name.endsWith("_ID")) assert.match(value ?? "", token, `${what}: ${name} is a subject token`);
  }
  assert.ok(lines >= 3, `the agents and the ranks name their host in a shell line (${lines} found)`);
});
