/**
 * Sealing NATS messages with the run secret (`src/transport/protocol/seal.ts`): what sealing and
 * opening one message costs, at the sizes a run sends — a small request (300 B), a rank's wire frame
 * of 1,000 keys (14 KB) and a rank's JSON reply of 1,000 keys (80 KB) — against an HMAC-SHA256 tag
 * over the same bytes (the peer: authentication without encryption), measured in the same run.
 *
 * Run: `npm run bench -- seal`.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { Opener, RunKey, Sealer } from "../src/transport/protocol/seal.js";

const key = RunKey.derive("bench-run-secret-0123456789abcdef-0123", "bench");
const hmacKey = randomBytes(32);
const SIZES: ReadonlyArray<[string, number]> = [
  ["request (300 B)", 300],
  ["wire frame, 1,000 keys (14 KB)", 14_000],
  ["JSON reply, 1,000 keys (80 KB)", 80_000],
];

/** Best of 7 rounds, µs per call. */
function measure(fn: () => void, bytes: number): number {
  const calls = Math.max(2000, Math.floor(4e8 / bytes / 10));
  let best = Infinity;
  for (let round = 0; round < 7; round++) {
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) fn();
    best = Math.min(best, ((performance.now() - t0) * 1000) / calls);
  }
  return best;
}

process.stdout.write(
  "| message | seal + open (AES-256-GCM) µs | HMAC-SHA256 sign + verify µs | GCM ÷ HMAC | GCM GB/s (both ends) |\n|---|---:|---:|---:|---:|\n",
);
for (const [name, size] of SIZES) {
  const payload = randomBytes(size);
  const sealer = new Sealer(key);
  // A fresh opener per round would cost a key derivation; one opener sees increasing numbers, as a receiver does.
  const opener = new Opener(key);
  const sealed = (): void => {
    const message = sealer.seal("rankscope.bench.ctl.X", undefined, payload);
    if (!opener.open("rankscope.bench.ctl.X", undefined, message).ok) throw new Error("a sealed message did not open");
  };
  const hmac = (): void => {
    const tag = createHmac("sha256", hmacKey).update("rankscope.bench.ctl.X").update(payload).digest();
    const again = createHmac("sha256", hmacKey).update("rankscope.bench.ctl.X").update(payload).digest();
    if (!timingSafeEqual(tag, again)) throw new Error("HMAC mismatch");
  };
  const gcm = measure(sealed, size);
  const mac = measure(hmac, size);
  process.stdout.write(
    `| ${name} | ${gcm.toFixed(1)} | ${mac.toFixed(1)} | ${(gcm / mac).toFixed(2)} | ${((2 * size) / gcm / 1000).toFixed(2)} |\n`,
  );
}
process.stdout.write(`\nBest of 7 rounds each; Node ${process.versions.node}, OpenSSL ${process.versions.openssl}.\n`);
