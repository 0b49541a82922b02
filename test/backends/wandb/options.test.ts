/** The `wandb` backend's options: the environment W&B's clients read, and run ids W&B accepts. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { resolveWandbOptions, sanitiseRunId } from "../../../src/backends/wandb/options.js";

describe("wandb options", () => {
  it("resolves the environment W&B's clients read, options first", () => {
    const env = {
      WANDB_API_KEY: "envkey",
      WANDB_BASE_URL: "http://127.0.0.1:9/",
      WANDB_MODE: "dryrun",
      WANDB_PROJECT: "p",
      WANDB_ENTITY: "e",
    };
    const fromEnv = resolveWandbOptions({ loggingMode: "global_reduce" }, env);
    assert.equal(fromEnv.apiKey, "envkey");
    assert.equal(fromEnv.baseUrl, "http://127.0.0.1:9");
    assert.equal(fromEnv.mode, "offline");
    assert.equal(fromEnv.project, "p");
    assert.equal(fromEnv.entity, "e");
    assert.equal(fromEnv.resume, "allow");
    const fromOptions = resolveWandbOptions(
      { loggingMode: "global_reduce", apiKey: "optkey", mode: "online", project: "q" },
      env,
    );
    assert.equal(fromOptions.apiKey, "optkey");
    assert.equal(fromOptions.mode, "online");
    assert.equal(fromOptions.project, "q");
  });

  it("derives run ids W&B accepts", () => {
    assert.equal(sanitiseRunId("my exp/trial 1"), "my-exp-trial-1");
    assert.equal(sanitiseRunId("a_b.c-d"), "a_b.c-d");
  });
});
