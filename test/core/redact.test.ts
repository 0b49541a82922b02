/**
 * The one redaction rule, for URLs (`redactUrlCredentials`): a URL's user part and secret-looking
 * query parameters never reach a message; every diagnostic passes through it.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { reportError, warn } from "../../src/core/diagnostics.js";
import { REDACTED, redactUrlCredentials } from "../../src/core/redact.js";
import { collectDiagnostics } from "../helpers.js";

test("a URL's user part goes whole: user and password, a token, a password holding an unescaped @", () => {
  assert.equal(redactUrlCredentials("nats://run-7:s3cret@n1:4222"), `nats://${REDACTED}@n1:4222`);
  assert.equal(redactUrlCredentials("nats://tok3n@127.0.0.1:4222"), `nats://${REDACTED}@127.0.0.1:4222`);
  assert.equal(redactUrlCredentials("nats://u:p@ss@n1:4222/x"), `nats://${REDACTED}@n1:4222/x`);
  assert.equal(
    redactUrlCredentials("nats://u:a@n1:4222,nats://u:a@n2:4222"),
    `nats://${REDACTED}@n1:4222,nats://${REDACTED}@n2:4222`,
  );
  assert.equal(
    redactUrlCredentials("cannot reach NATS at tls://u:pw@n1:4222 (retrying); see https://docs.example/x"),
    `cannot reach NATS at tls://${REDACTED}@n1:4222 (retrying); see https://docs.example/x`,
  );
});

test("secret-looking query parameters lose their values, by the same key patterns as configs; the rest is untouched", () => {
  assert.equal(redactUrlCredentials("http://h:8080/?token=abc&step=3"), `http://h:8080/?token=${REDACTED}&step=3`);
  assert.equal(
    redactUrlCredentials("https://h/write?api_key=k1&password=p2#frag"),
    `https://h/write?api_key=${REDACTED}&password=${REDACTED}#frag`,
  );
  for (const text of ["nats://n1:4222", "mail me at someone@example.com", "step=3 of 5", "http://h/?step=3"])
    assert.equal(redactUrlCredentials(text), text);
});

test("every diagnostic is redacted before anyone sees it", async () => {
  const seen = await collectDiagnostics(() => {
    warn("test.redact", "the controller lost its NATS connection to nats://run-7-controller:Pw-77@n1:4222");
    reportError("test.redact2", "POST https://h/write?token=T-88: HTTP 500");
  });
  const text = seen.map((d) => d.message).join("\n");
  assert.ok(!text.includes("Pw-77") && !text.includes("T-88"), text);
  assert.match(text, /nats:\/\/\*\*\*REDACTED\*\*\*@n1:4222/);
});
