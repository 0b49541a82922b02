import assert from "node:assert/strict";
import { test } from "node:test";
import { monotonicCommitStep, MonotonicStep } from "../../src/core/step.js";

test("commit step is max(step, last + 1): repeated and earlier steps move forward", () => {
  assert.equal(monotonicCommitStep(5, undefined), 5);
  assert.equal(monotonicCommitStep(5, 3), 5);
  assert.equal(monotonicCommitStep(3, 3), 4);
  assert.equal(monotonicCommitStep(0, 9), 10);
  const commits = new MonotonicStep();
  assert.deepEqual(
    [0, 1, 1, 1, 7, 2].map((s) => commits.commit(s)),
    [0, 1, 2, 3, 7, 8],
  );
  assert.equal(new MonotonicStep(10).commit(4), 11, "a resumed run continues after its last step");
});
