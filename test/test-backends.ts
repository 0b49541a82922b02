/**
 * The backends the tests register, declared for the compiler the way a user declares theirs
 * (declaration merging into `BackendOptionsMap`), so their configs type-check like built-in ones.
 */
declare module "../src/backends/options.js" {
  interface BackendOptionsMap {
    broken: Record<string, unknown>;
    capture: Record<string, unknown>;
    capture2: Record<string, unknown>;
    capture3: Record<string, unknown>;
    "capture-true": Record<string, unknown>;
    "capture-false": Record<string, unknown>;
    counting: Record<string, unknown>;
    failsInit: Record<string, unknown>;
    hang: Record<string, unknown>;
    hangRank: Record<string, unknown>;
    probe: Record<string, unknown>;
    slow: Record<string, unknown>;
    slowInit: Record<string, unknown>;
    slowstream: Record<string, unknown>;
    streamFast: Record<string, unknown>;
    streamHung: Record<string, unknown>;
    spy: Record<string, unknown>;
    streamCapture: Record<string, unknown>;
    "test-stream-capture": Record<string, unknown>;
    openstd_capture: Record<string, unknown>;
    openstd_otlp_capture: Record<string, unknown>;
  }
}
export {};
