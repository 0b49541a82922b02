/** The ring on its own: slots in and out in order, a full ring drops and counts, probes copy N values. */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  createControl,
  createRing,
  emptySlot,
  KIND_METRIC,
  KIND_PROBE,
  readSlot,
  RingProducer,
  RingView,
  TAIL,
} from "../../src/stream/ring.js";

function take(view: RingView): ReturnType<typeof emptySlot>[] {
  const out = [];
  let tail = Atomics.load(view.i32, TAIL);
  const head = Atomics.load(view.i32, 0);
  while (tail !== head) {
    out.push({ ...readSlot(view, tail, emptySlot()) });
    tail = (tail + 1) | 0;
  }
  Atomics.store(view.i32, TAIL, tail);
  return out;
}

describe("ring", () => {
  it("rounds capacity up to a power of two", () => {
    assert.equal(createRing(1000, 4).capacity, 1024);
    assert.equal(createRing(1024, 4).capacity, 1024);
  });

  it("keeps every record below capacity, in order, across many wrap-arounds", () => {
    const shape = createRing(8, 2);
    const producer = new RingProducer(shape, createControl(100));
    const view = new RingView(shape);
    const seen: number[] = [];
    for (let round = 0; round < 50; round++) {
      for (let i = 0; i < 5; i++) assert.equal(producer.pushValue(3, round * 5 + i, round, 1000 + i), true);
      for (const slot of take(view)) {
        assert.equal(slot.kind, KIND_METRIC);
        assert.equal(slot.keyId, 3);
        assert.equal(slot.step, Math.floor(slot.value / 5));
        seen.push(slot.value);
      }
    }
    assert.deepEqual(
      seen,
      Array.from({ length: 250 }, (_, i) => i),
    );
    assert.equal(producer.ringFull, 0);
  });

  it("drops and counts when full, never overwriting what the consumer has not taken", () => {
    const shape = createRing(16, 0);
    const producer = new RingProducer(shape, createControl(100));
    let kept = 0;
    for (let i = 0; i < 100; i++) if (producer.pushValue(0, i, 0, 0)) kept++;
    assert.equal(kept, 16);
    assert.equal(producer.ringFull, 84);
    const view = new RingView(shape);
    assert.equal(view.ringFull, 84, "the consumer sees the same count");
    assert.deepEqual(
      take(view).map((s) => s.value),
      Array.from({ length: 16 }, (_, i) => i),
      "the oldest 16 survive",
    );
    assert.equal(producer.pushValue(0, 1, 0, 0), true, "room again once the consumer has taken them");
  });

  it("copies the first N values of a probe, its length and element type", () => {
    const shape = createRing(4, 3);
    const producer = new RingProducer(shape, createControl(100));
    producer.pushProbe(1, new Float32Array([0.5, 1.5, 2.5, 3.5, 4.5]), 7, 1);
    producer.pushProbe(2, new Float64Array([0.1]), 8, 2);
    producer.pushProbe(3, [1, 2, 3], 9, 3);
    const slots = take(new RingView(shape));
    const view = new RingView(shape);
    const valuesOf = (s: (typeof slots)[number]) => Array.from(view.f64.subarray(s.valuesAt, s.valuesAt + s.count));
    assert.deepEqual(
      slots.map((s) => [s.kind, s.keyId, s.index, s.length, s.dtype]),
      [
        [KIND_PROBE, 1, 7, 5, "f32"],
        [KIND_PROBE, 2, 8, 1, "f64"],
        [KIND_PROBE, 3, 9, 3, "number"],
      ],
    );
    assert.deepEqual(slots.map(valuesOf), [[0.5, 1.5, 2.5], [0.1], [1, 2, 3]]);
  });

  it("wakes the writer once each time the fill crosses the batch size", () => {
    const control = createControl(4);
    const producer = new RingProducer(createRing(64, 0), control);
    for (let i = 0; i < 10; i++) producer.pushValue(0, i, 0, 0);
    assert.equal(Atomics.load(control, 0), 1, "one wake for 10 records with nobody draining");
  });
});
