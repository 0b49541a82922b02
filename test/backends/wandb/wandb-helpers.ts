/** Helpers of the W&B tests: a strict server per test, expected values, and a leak check for the key. */
import { readdirSync, readFileSync, statSync } from "node:fs";
import assert from "node:assert/strict";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { getCollector } from "../../../src/core/collector.js";
import { resetDiagnostics } from "../../../src/core/diagnostics.js";
import { StrictWandbServer, type HistoryRow } from "./wandb-server.js";

/** A key that would be easy to spot anywhere it leaked. */
export const API_KEY = "local-test-key-6f1c0de0b1e2a3c4d5e6f708192a3b4c";

/** Fast retry settings so fault tests take seconds, not minutes. */
export const FAST = {
  requestTimeoutMs: 400,
  retryInitialMs: 20,
  retryMaxMs: 200,
  retryBudgetMs: 3000,
  finishTimeoutMs: 3000,
  sendIntervalMs: 50,
} as const;

export async function startServer(): Promise<StrictWandbServer> {
  const server = new StrictWandbServer(API_KEY);
  await server.start();
  return server;
}

/** A clean slate for the process-wide collector and diagnostics. */
export function resetProcess(): void {
  getCollector().clear();
  getCollector().stream = null;
  resetDiagnostics();
}

/** Every value of `key` in history rows, in row order. */
export function valuesOf(rows: readonly HistoryRow[], key: string): unknown[] {
  return rows.filter((r) => key in r).map((r) => r[key]);
}

/** Every file under a directory (recursively). */
export function allFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...allFiles(path));
    else out.push(path);
  }
  return out;
}

/** Files under `dir` whose content contains the API key (should be none). */
export function filesContainingKey(dir: string): string[] {
  return allFiles(dir).filter((f) => readFileSync(f, "utf8").includes(API_KEY));
}

/**
 * Decode a `.wandb` transaction log as wandb-core's reader does (core/pkg/leveldb/record.go),
 * asserting every rule: the W&B header, chunks within their 32 KiB block, CRC-32 of type and data,
 * chunk types in order, zero padding where fewer than 7 bytes are left. Returns the records and
 * how many spanned more than one chunk.
 */
export function decodeTransactionLog(data: Buffer): { records: Buffer[]; spanned: number; padded: number } {
  assert.deepEqual(
    [...data.subarray(0, 7)],
    [0x3a, 0x57, 0x26, 0x42, 0xe1, 0xbe, 0],
    "the W&B header: :W&B, magic 0xBEE1 LE, version 0",
  );
  const records: Buffer[] = [];
  let pos = 7;
  let pending: Buffer | null = null;
  let spanned = 0;
  let padded = 0;
  while (pos < data.length) {
    const left = 32768 - (pos % 32768);
    if (left < 7) {
      assert.ok(
        data.subarray(pos, pos + left).every((b) => b === 0),
        `zero padding at ${pos}`,
      );
      pos += left;
      padded++;
      continue;
    }
    const crc = data.readUInt32LE(pos);
    const length = data.readUInt16LE(pos + 4);
    const type = data[pos + 6] as number;
    assert.ok(7 + length <= left, `the chunk at ${pos} stays in its block`);
    assert.ok(pos + 7 + length <= data.length, `the chunk at ${pos} is complete`);
    assert.equal(crc32(data.subarray(pos + 6, pos + 7 + length)), crc, `CRC of the chunk at ${pos}`);
    const body = data.subarray(pos + 7, pos + 7 + length);
    pos += 7 + length;
    if (type === 1) {
      assert.equal(pending, null, "a full chunk inside a record");
      records.push(body);
    } else if (type === 2) {
      assert.equal(pending, null, "a first chunk inside a record");
      pending = body;
    } else if (type === 3) {
      assert.ok(pending !== null, "a middle chunk outside a record");
      pending = Buffer.concat([pending, body]);
    } else if (type === 4) {
      assert.ok(pending !== null, "a last chunk outside a record");
      records.push(Buffer.concat([pending, body]));
      pending = null;
      spanned++;
    } else {
      assert.fail(`chunk type ${type} at ${pos}`);
    }
  }
  assert.equal(pending, null, "the last record is complete");
  return { records, spanned, padded };
}

/**
 * The environment the official `wandb` CLI runs in for a test: everything the SDK writes for itself
 * goes to the scratch `home`, and its only server is `baseUrl` (the strict local one).
 */
export function wandbSdkEnv(home: string, baseUrl: string, apiKey: string): Record<string, string> {
  return {
    PATH: process.env["PATH"] ?? "",
    HOME: home,
    WANDB_BASE_URL: baseUrl,
    WANDB_API_KEY: apiKey,
    WANDB_CONFIG_DIR: join(home, "config"),
    WANDB_CACHE_DIR: join(home, "cache"),
    WANDB_DATA_DIR: join(home, "data"),
    WANDB_DIR: home,
    WANDB_ERROR_REPORTING: "false",
    WANDB_SILENT: "true",
    NO_PROXY: "127.0.0.1",
  };
}
