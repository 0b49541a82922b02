/**
 * Loaded into `rankscope server` by the mixed-load benchmark (`node --import`): where a request's
 * time goes inside the server, measured the same way whatever the server's version. The event
 * loop's delay (`monitorEventLoopDelay`), and per node-postgres pool (by its `application_name`)
 * the wait for a connection and how long each connection was held (a query, or a batch's whole
 * transaction). Written as JSON to `$SERVER_PROBE_OUT` when the process exits.
 */
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { monitorEventLoopDelay } from "node:perf_hooks";

const require = createRequire(import.meta.url);
const pg = require("pg");
const out = process.env.SERVER_PROBE_OUT;
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
/** name → { wait: ms[], held: ms[] } */
const pools = {};
const samples = (name) => (pools[name] ??= { wait: [], held: [] });

const connect = pg.Pool.prototype.connect;
pg.Pool.prototype.connect = function (cb) {
  const asked = performance.now();
  const name = this.options.application_name ?? "pool";
  const got = (client) => {
    const at = performance.now();
    samples(name).wait.push(at - asked);
    const release = client.release;
    client.release = function (...args) {
      samples(name).held.push(performance.now() - at);
      client.release = release;
      return release.apply(this, args);
    };
  };
  if (typeof cb === "function")
    return connect.call(this, (err, client, done) => {
      if (!err && client) got(client);
      cb(err, client, done);
    });
  return connect.call(this).then((client) => {
    got(client);
    return client;
  });
};

process.on("exit", () => {
  if (!out) return;
  writeFileSync(
    out,
    JSON.stringify({
      // What the 10 ms timer waited past its interval.
      loop: {
        p50: Math.max(0, loop.percentile(50) / 1e6 - 10),
        p99: Math.max(0, loop.percentile(99) / 1e6 - 10),
        max: Math.max(0, loop.max / 1e6 - 10),
      },
      pools,
    }),
  );
});
