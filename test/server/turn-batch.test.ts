import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TurnBatch } from "../../src/server/turn-batch.js";

describe("TurnBatch", () => {
  it("loads what one turn asks in one call, each caller its own value, and a later turn in another", async () => {
    const loads: string[][] = [];
    const batch = new TurnBatch<string, number>((keys) => {
      loads.push([...keys]);
      return Promise.resolve(new Map(keys.filter((k) => k !== "missing").map((k) => [k, k.length])));
    });
    const first = await Promise.all([batch.get("a"), batch.get("bbb"), batch.get("a"), batch.get("missing")]);
    assert.deepEqual(first, [1, 3, 1, undefined]);
    assert.deepEqual(loads, [["a", "bbb", "missing"]]);
    assert.equal(await batch.get("cc"), 2);
    assert.deepEqual(loads, [["a", "bbb", "missing"], ["cc"]]);
  });

  it("rejects every caller of a turn whose load failed, and loads the next turn afresh", async () => {
    let fail = true;
    const batch = new TurnBatch<number, number>((keys) =>
      fail ? Promise.reject(new Error("database down")) : Promise.resolve(new Map(keys.map((k) => [k, k * 2]))),
    );
    const asked = [batch.get(1), batch.get(2)];
    for (const p of asked) await assert.rejects(p, /database down/);
    fail = false;
    assert.equal(await batch.get(2), 4);
  });
});
