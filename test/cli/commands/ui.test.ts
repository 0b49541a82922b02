/** `rankscope ui` as a user runs it: prints the URL, serves, stops on SIGTERM; bad arguments fail clearly. */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { builtCli, tempDir } from "../../helpers.js";
import { seedFinishedRun } from "../../ui/seed.js";

const main = builtCli();

describe("rankscope ui", () => {
  let root: string;
  before(() => {
    root = tempDir("rankscope-ui-cli-");
    seedFinishedRun(root);
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  it("prints the URL, serves the runs and stops on SIGTERM", async () => {
    const child = spawn(process.execPath, [main, "ui", "--root", root, "--port", "0"], {
      stdio: ["ignore", "pipe", "pipe"],
      // A deadline on the exit awaited after SIGTERM: a server that ignores it is killed (code null).
      timeout: 60_000,
      killSignal: "SIGKILL",
    });
    try {
      const url = await new Promise<string>((resolvePromise, reject) => {
        let out = "";
        child.stdout.setEncoding("utf8");
        child.stdout.on("data", (chunk: string) => {
          out += chunk;
          const match = /rankscope dashboard: (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
          if (match?.[1] !== undefined) resolvePromise(match[1]);
        });
        child.once("exit", (code) => reject(new Error(`rankscope ui exited with ${code}: ${out}`)));
      });
      const answer = await fetch(`${url}api/runs`);
      assert.equal(answer.status, 200);
      const { runs } = (await answer.json()) as { runs: { id: string }[] };
      assert.deepEqual(
        runs.map((r) => r.id),
        ["exp/base"],
      );
    } finally {
      const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
      child.kill("SIGTERM");
      assert.equal(await exited, 0);
    }
  });

  it("rejects bad arguments with a message and a non-zero exit", () => {
    const badPort = spawnSync(process.execPath, [main, "ui", "--root", root, "--port", "seventy"], {
      encoding: "utf8",
    });
    assert.notEqual(badPort.status, 0);
    assert.match(badPort.stderr, /--port must be an integer from 0 to 65535, got seventy/);
    const badRoot = spawnSync(process.execPath, [main, "ui", "--root", join(root, "missing")], {
      encoding: "utf8",
    });
    assert.notEqual(badRoot.status, 0);
    assert.match(badRoot.stderr, /is not a directory; pass --root DIR/);
    const help = spawnSync(process.execPath, [main, "ui", "--help"], { encoding: "utf8" });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /--host <address>/);
  });
});
