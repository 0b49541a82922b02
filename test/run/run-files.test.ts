import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parse } from "yaml";
import { MetricLogger } from "../../src/controller/metric-logger.js";
import { redactSecrets, REDACTED, writeRunFiles, type VersionInfo } from "../../src/run/run-files.js";
import { tempDir } from "../helpers.js";

const packageVersion = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

test("initBackends({ runConfig }) writes config.yaml with secrets redacted and version.json, in {root}/{experiment}/{trial}", async () => {
  const root = tempDir();
  const logger = new MetricLogger({ root, experiment: "grpo", trial: "t1" });
  const runConfig = {
    model: { name: "tiny", maxNewTokens: 128 },
    wandb: { project: "p", apiKey: "abc123", api_key: "k2" },
    optimizer: { lr: 1e-4, betas: [0.9, 0.95] },
    hfToken: "hf_xyz",
    db: { password: "hunter2", user: "me" },
  };
  await logger.initBackends({}, { runConfig });
  await logger.shutdown();
  const runDir = join(root, "grpo", "t1");
  const text = readFileSync(join(runDir, "config.yaml"), "utf8");
  assert.ok(!/abc123|k2|hf_xyz|hunter2/.test(text), `no secret in config.yaml:\n${text}`);
  assert.deepEqual(parse(text), {
    model: { name: "tiny", maxNewTokens: 128 },
    wandb: { project: "p", apiKey: REDACTED, api_key: REDACTED },
    optimizer: { lr: 1e-4, betas: [0.9, 0.95] },
    hfToken: REDACTED,
    db: { password: REDACTED, user: "me" },
  });
  const version = JSON.parse(readFileSync(join(runDir, "version.json"), "utf8")) as VersionInfo;
  assert.equal(version.rankscope.version, packageVersion);
  assert.equal(version.node, process.version);
});

test("without a runConfig, initBackends writes no files (a console-only job leaves nothing behind)", async () => {
  const root = tempDir();
  const logger = new MetricLogger({ root, experiment: "e", trial: "t" });
  await logger.initBackends({});
  await logger.shutdown();
  assert.equal(existsSync(join(root, "e")), false);
});

test("version.json records branch, commit and dirty flag of a git working directory", async () => {
  const repo = tempDir();
  const git = (...args: string[]): string =>
    execFileSync(
      "git",
      ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "init.defaultBranch=main", ...args],
      { cwd: repo, encoding: "utf8" },
    ).trim();
  git("init", "-q");
  git("checkout", "-q", "-b", "exp/lr-sweep");
  writeFileSync(join(repo, "train.py"), "print(1)\n");
  git("add", "train.py");
  git("commit", "-qm", "first");
  const commit = git("rev-parse", "HEAD");

  const clean = tempDir();
  await writeRunFiles(clean, { cwd: repo });
  const v1 = JSON.parse(readFileSync(join(clean, "version.json"), "utf8")) as VersionInfo;
  assert.deepEqual(v1.git, { branch: "exp/lr-sweep", commit, dirty: false });

  writeFileSync(join(repo, "train.py"), "print(2)\n");
  const dirty = tempDir();
  await writeRunFiles(dirty, { cwd: repo, config: { a: 1 } });
  const v2 = JSON.parse(readFileSync(join(dirty, "version.json"), "utf8")) as VersionInfo;
  assert.deepEqual(v2.git, { branch: "exp/lr-sweep", commit, dirty: true });
  assert.equal(readFileSync(join(dirty, "config.yaml"), "utf8"), "a: 1\n");
});

test("outside a git repository version.json has git: null and nothing fails", async () => {
  const notRepo = tempDir();
  const out = tempDir();
  const files = await writeRunFiles(out, { cwd: notRepo });
  assert.equal(files.configPath, null);
  const v = JSON.parse(readFileSync(join(out, "version.json"), "utf8")) as VersionInfo;
  assert.equal(v.git, null);
});

test("redaction: nested, in arrays, case-insensitive; ordinary keys such as maxTokens are kept", () => {
  assert.deepEqual(
    redactSecrets({
      runs: [{ API_KEY: "x", tokens: 5 }],
      Secret: "s",
      authToken: "t",
      max_tokens: 9,
      auth: "a",
      empty: { apiKey: "" },
    }),
    {
      runs: [{ API_KEY: REDACTED, tokens: 5 }],
      Secret: REDACTED,
      authToken: REDACTED,
      max_tokens: 9,
      auth: REDACTED,
      empty: { apiKey: "" },
    },
  );
  assert.deepEqual(redactSecrets({ custom: "v" }, [/custom/]), { custom: REDACTED });
});
