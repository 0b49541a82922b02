/**
 * One Python environment for the tests that check our files with the tools users use
 * (TensorBoard's readers, the official W&B SDK and its `wandb sync`).
 *
 * `pythonKit("tensorboard" | "tensorboardx" | "wandb")` returns a Python that has the kit installed, or the reason it
 * cannot be had (the test then skips saying so). The environment is a venv made once in
 * `node_modules/.cache/rankscope-py` and reused by every test file and run; `RANKSCOPE_PYTHON`
 * (or, for TensorBoard, the older `RANKSCOPE_TENSORBOARD_PYTHON`) points at another Python instead.
 *
 * Packages come from pip's configured package sources. When pip is configured with local
 * (`file://`) indexes, only those are used (`--index-url`), so setting up never needs a network.
 * wandb 0.30's dependency chain needs `opentelemetry-semantic-conventions`, which a local wheel
 * mirror may lack; wandb uses it only for its own telemetry, so then the SDK and the OpenTelemetry
 * packages are installed without dependencies, the rest of its dependencies normally, and a
 * stand-in module for the attribute-name constants is written (`otel-semconv-standin.py`). The
 * SDK's data path (its protobufs, `wandb-core`, `wandb sync`) is the real one.
 */
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export type PythonKitName = "tensorboard" | "tensorboardx" | "wandb";

/** A Python with a kit, or why there is none. */
export type PythonKit =
  | { readonly python: string; readonly version: string; readonly skip: false }
  | { readonly python: null; readonly version: null; readonly skip: string };

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "..", "..");
const venvDir = join(repoRoot, "node_modules", ".cache", "rankscope-py");
const venvPython = join(venvDir, "bin", "python");

interface KitRecipe {
  /** Prints the kit's version when it works. */
  readonly probe: string;
  /** pip install steps, in order (each an argument list after `pip install`). */
  readonly install: readonly (readonly string[])[];
  /** After installing: repair steps (the semantic-conventions stand-in for wandb). */
  readonly repair?: (python: string) => void;
}

const OTEL = [
  "opentelemetry-api",
  "opentelemetry-sdk",
  "opentelemetry-proto",
  "opentelemetry-exporter-otlp-proto-common",
  "opentelemetry-exporter-otlp-proto-http",
];
const WANDB_DEPS = [
  "click>=8.2",
  "packaging",
  "platformdirs",
  "protobuf>=5,<8",
  "pydantic>=2.6,<3",
  "pyyaml",
  "requests>=2,<3",
  "typing-extensions>=4.8,<5",
  "xxhash>=3",
];

const RECIPES: Record<PythonKitName, KitRecipe> = {
  tensorboard: {
    probe: "import tensorboard, tensorboard_data_server; print(tensorboard.__version__)",
    install: [["tensorboard==2.21.*"]],
  },
  tensorboardx: {
    probe:
      "import tensorboard, tensorboardX; from tensorboard.summary.writer.event_file_writer import EventFileWriter; print(tensorboard.__version__ + ' ' + tensorboardX.__version__)",
    install: [["tensorboard==2.21.*", "tensorboardX"]],
  },
  wandb: {
    probe: "import wandb; from wandb.proto import wandb_internal_pb2; print(wandb.__version__)",
    install: [["--no-deps", "wandb==0.30.0", ...OTEL], WANDB_DEPS],
    repair: (python) => {
      const check = run(python, ["-c", "import opentelemetry.semconv"]);
      if (check.status === 0) return;
      const site = run(python, [
        "-c",
        "import opentelemetry, os; print(os.path.dirname(opentelemetry.__path__[0]))",
      ]).stdout.trim();
      const target = join(site, "opentelemetry", "semconv");
      mkdirSync(target, { recursive: true });
      copyFileSync(join(here, "otel-semconv-standin.py"), join(target, "__init__.py"));
    },
  },
};

function run(command: string, args: readonly string[], timeoutMs = 600_000): SpawnSyncReturns<string> {
  return spawnSync(command, args, {
    encoding: "utf8",
    timeout: timeoutMs,
    env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1" },
  });
}

function probe(python: string, kit: PythonKitName): string | null {
  const result = run(python, ["-c", RECIPES[kit].probe], 120_000);
  return result.status === 0 ? (result.stdout.trim().split("\n").pop() ?? "") : null;
}

/** pip's local (`file://`) package indexes from its configuration: use only those when there are any. */
function localIndexArgs(python: string): string[] {
  const config = run(python, ["-m", "pip", "config", "list"]).stdout;
  const urls: string[] = [];
  for (const line of config.split("\n")) {
    const match = /^[\w.-]+\.(?:extra-index-url|index-url)='(.*)'$/.exec(line.trim());
    if (match !== null)
      for (const url of (match[1] as string).split(/\s+/))
        if (url.startsWith("file://") && existsSync(fileURLToPath(url))) urls.push(url);
  }
  if (urls.length === 0) return ["--retries", "1"];
  const [first, ...rest] = urls;
  return ["--retries", "0", "--index-url", first as string, ...rest.flatMap((u) => ["--extra-index-url", u])];
}

const cache = new Map<PythonKitName, PythonKit>();

/**
 * A Python with `kit` installed: the one named by `RANKSCOPE_PYTHON`, else the shared venv, made
 * (and the kit installed into it) on first use. Synchronous, so a test file knows at load time
 * whether to skip.
 */
export function pythonKit(kit: PythonKitName): PythonKit {
  const known = cache.get(kit);
  if (known !== undefined) return known;
  const result = setUp(kit);
  cache.set(kit, result);
  return result;
}

function setUp(kit: PythonKitName): PythonKit {
  const override =
    process.env["RANKSCOPE_PYTHON"] ??
    (kit === "tensorboard" ? process.env["RANKSCOPE_TENSORBOARD_PYTHON"] : undefined);
  if (override !== undefined && override !== "") {
    const version = probe(override, kit);
    return version === null
      ? { python: null, version: null, skip: `${override} (RANKSCOPE_PYTHON) cannot import ${kit}` }
      : { python: override, version, skip: false };
  }
  const marker = join(venvDir, `rankscope-${kit}.ok`);
  if (existsSync(marker) && existsSync(venvPython)) {
    const version = probe(venvPython, kit);
    if (version !== null) return { python: venvPython, version, skip: false };
  }
  // Test files run in parallel: one process sets the venv up, the others wait for it.
  const lock = lockVenv();
  if (typeof lock === "string")
    return { python: null, version: null, skip: `cannot set up a Python with ${kit}: ${lock}` };
  try {
    if (existsSync(marker) && existsSync(venvPython)) {
      const version = probe(venvPython, kit);
      if (version !== null) return { python: venvPython, version, skip: false };
    }
    return install(kit, marker);
  } finally {
    lock();
  }
}

/** Take the venv's lock (a directory holding the owner's pid); returns its release, or why not. */
function lockVenv(): (() => void) | string {
  const lock = `${venvDir}.lock`;
  mkdirSync(dirname(lock), { recursive: true });
  const deadline = Date.now() + 15 * 60_000;
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, "pid"), String(process.pid));
      return () => rmSync(lock, { recursive: true, force: true });
    } catch {
      let owner = Number.NaN;
      try {
        owner = Number(readFileSync(join(lock, "pid"), "utf8"));
      } catch {
        // being created or removed right now
      }
      if (Number.isInteger(owner) && owner > 0 && !alive(owner)) rmSync(lock, { recursive: true, force: true });
      if (Date.now() > deadline) return `${lock} is held by process ${owner} for more than 15 minutes`;
      Atomics.wait(pause, 0, 0, 250);
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function install(kit: PythonKitName, marker: string): PythonKit {
  const steps: string[] = [];
  const failed = (why: string): PythonKit => ({
    python: null,
    version: null,
    skip: `cannot set up a Python with ${kit} in ${venvDir}: ${why} (set RANKSCOPE_PYTHON to a Python that has it)`,
  });
  if (!existsSync(venvPython)) {
    rmSync(venvDir, { recursive: true, force: true });
    mkdirSync(dirname(venvDir), { recursive: true });
    const made = run("python3", ["-m", "venv", venvDir]);
    if (made.status !== 0)
      return failed(`python3 -m venv failed: ${(made.stderr || made.error?.message || "").trim().slice(-500)}`);
  }
  const index = localIndexArgs(venvPython);
  for (const args of RECIPES[kit].install) {
    const installed = run(venvPython, ["-m", "pip", "install", "--quiet", ...index, ...args]);
    steps.push(args.join(" "));
    if (installed.status !== 0)
      return failed(
        `pip install ${args.join(" ")} failed: ${(installed.stderr || installed.error?.message || "").trim().slice(-800)}`,
      );
  }
  RECIPES[kit].repair?.(venvPython);
  const version = probe(venvPython, kit);
  if (version === null)
    return failed(
      `the ${kit} package does not import after installing (${steps.join("; ")}): ${run(venvPython, ["-c", RECIPES[kit].probe]).stderr.trim().slice(-800)}`,
    );
  writeFileSync(marker, `${version}\n`);
  return { python: venvPython, version, skip: false };
}

/** The directory of the venv's console scripts (e.g. `wandb`). */
export function binDir(python: string): string {
  return dirname(python);
}
