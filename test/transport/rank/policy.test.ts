/**
 * A rank's own side bounds what even an authenticated request can make it do (attacks 2 and 3 of
 * issue 21): it imports only the module it was given at its start, and per-rank backend configs
 * received over NATS cannot send data to a destination it did not allow nor write outside the run
 * directory. Each refusal is answered as an error, counted as `refused`, and changes nothing.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import "../../../src/backends/builtin.js";
import { Collector } from "../../../src/core/collector.js";
import {
  decodeProtocolMessage,
  encodeProtocolMessage,
  ignoredMessageCounts,
  type ControllerRequest,
  type RankReply,
} from "../../../src/transport/protocol/messages.js";
import type { RankPolicy } from "../../../src/transport/rank/policy.js";
import { RankAgent } from "../../../src/transport/rank/rank-agent.js";
import { RankRuntime } from "../../../src/pipeline/runtime.js";
import type { UncheckedBackendsConfig } from "../../../src/backends/options.js";
import { collectDiagnostics, tempDir } from "../../helpers.js";

const IDENTITY = { rank: 0, rankName: "Policy_AAAA_r0", processName: "Policy", localRank: 0, localWorldSize: 1 };
const ALLOWED = new URL("./fixtures/allowed-module.mjs", import.meta.url).href;
const EVIL = new URL("../../fixtures/evil-module.mjs", import.meta.url).href;

/** A rank agent with `policy`, and a function that sends it one request and returns its reply. */
function rankWith(policy: RankPolicy): {
  ask: (request: ControllerRequest) => Promise<RankReply>;
  runtime: RankRuntime;
} {
  const runtime = new RankRuntime(IDENTITY, new Collector());
  const agent = new RankAgent({ runId: "run-1", runtime, policy });
  const ask = async (request: ControllerRequest): Promise<RankReply> => {
    let answer: string | undefined;
    await agent.receive(encodeProtocolMessage("run-1", request), (text) => (answer = text));
    const reply = decodeProtocolMessage("run-1", answer, "the rank");
    assert.ok(reply?.t === "reply", `the rank answered ${String(answer)}`);
    return reply;
  };
  return { ask, runtime };
}

const init = (runDir: string, backends: UncheckedBackendsConfig): ControllerRequest => ({
  t: "init",
  id: 1,
  init: { backends, primaryMetadata: {}, run: { runDir, experiment: "e", trial: "t", resumeStep: 0 } },
});

test("a rank imports only the module it was given at its start, never a path from the wire", async () => {
  const { ask } = rankWith({ modules: [ALLOWED], trustInit: false, destinations: [] });
  const before = ignoredMessageCounts().refused;
  await collectDiagnostics(async () => {
    const evil = await ask({ t: "start", id: 1, module: EVIL });
    assert.ok(!evil.ok);
    assert.match(evil.error, /was not given at its start \(allowed: .*allowed-module\.mjs\)/);
    const evilPath = await ask({ t: "start", id: 2, module: new URL(EVIL).pathname });
    assert.ok(!evilPath.ok, "nor as a path");
    const allowed = await ask({ t: "start", id: 3, module: ALLOWED });
    assert.ok(allowed.ok);
    assert.deepEqual(allowed.result, ["hello"]);
  });
  assert.equal(
    (globalThis as { rankscopeEvilModuleImported?: boolean }).rankscopeEvilModuleImported,
    undefined,
    "the module from the wire was never imported",
  );
  assert.equal(ignoredMessageCounts().refused - before, 2);
});

test("over NATS, per-rank configs cannot send to a destination the rank did not allow, nor write outside the run directory", async () => {
  const runDir = tempDir();
  // An absolute path outside the run directory that the attacker would like written.
  const outside = join(tmpdir(), `rankscope-pwned-${process.pid}.jsonl`);
  const { ask } = rankWith({ modules: [], trustInit: false, destinations: ["http://wandb.allowed.example:8080"] });
  const before = ignoredMessageCounts().refused;
  await collectDiagnostics(async () => {
    const refusals: Array<[UncheckedBackendsConfig, RegExp]> = [
      [
        { wandb: { loggingMode: "per_rank_reduce", mode: "offline", baseUrl: "http://attacker.example" } },
        /baseUrl "http:\/\/attacker\.example", a destination this rank does not allow/,
      ],
      [
        { otlp: { loggingMode: "per_rank_reduce", url: "http://attacker.example/v1/metrics" } },
        /url "http:\/\/attacker\.example\/v1\/metrics", a destination this rank does not allow/,
      ],
      [
        { jsonl: { loggingMode: "per_rank_reduce", file: outside } },
        new RegExp(
          `file "${outside.replaceAll(/[.*+?^${}()|[\]\\]/g, "\\$&")}"; from the wire a rank writes only inside the run directory`,
        ),
      ],
      [
        { jsonl: { loggingMode: "per_rank_reduce", file: "../../pwned.jsonl" } },
        /writes only inside the run directory/,
      ],
      [{ tensorboard: { loggingMode: "per_rank_reduce", dir: "/etc" } }, /writes only inside the run directory/],
    ];
    for (const [backends, error] of refusals) {
      const reply = await ask(init(runDir, backends));
      assert.ok(!reply.ok, JSON.stringify(backends));
      assert.match(reply.error, error);
    }
    const relativeRunDir = await ask(init("runs/../../etc", { console: { loggingMode: "per_rank_reduce" } }));
    assert.ok(!relativeRunDir.ok && /must be an absolute path/.test(relativeRunDir.error));
    const allowed = await ask(
      init(runDir, {
        wandb: { loggingMode: "per_rank_reduce", mode: "offline", baseUrl: "http://wandb.allowed.example:8080" },
        jsonl: { loggingMode: "per_rank_reduce", file: "ranks/r0.jsonl" },
      }),
    );
    assert.ok(allowed.ok, allowed.ok ? "" : allowed.error);
  });
  assert.equal(ignoredMessageCounts().refused - before, 6);
  assert.ok(!existsSync(outside) && !existsSync(join(runDir, "..", "..", "pwned.jsonl")));
});

test("over a parent channel (worker port, IPC) the rank takes the configs of the process that started it", async () => {
  const { ask } = rankWith({ modules: [], trustInit: true, destinations: [] });
  const reply = await ask(
    init(tempDir(), {
      wandb: { loggingMode: "per_rank_reduce", mode: "offline", baseUrl: "http://wandb.internal:8080" },
    }),
  );
  assert.ok(reply.ok, reply.ok ? "" : reply.error);
});
