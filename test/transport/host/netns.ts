/**
 * Hosts as Linux network namespaces, made by the test: a bridge `rs-scale-br` in the root
 * namespace (10.213.7.1/24, the controller's side), per host a namespace `rs-scale-hN` with a veth
 * pair (`rs-scale-vN` on the bridge, `rs-scale-eN` inside at 10.213.7.(10+N)), and per NATS node a
 * namespace `rs-scale-nN` (`rs-scale-wN` / `rs-scale-fN`, at 10.213.7.(20+N)). Only these private
 * addresses, which exist only on this machine, are ever used. Needs root (CAP_NET_ADMIN).
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";

const PREFIX = "rs-scale-";
const BRIDGE = `${PREFIX}br`;
export const CONTROLLER_ADDRESS = "10.213.7.1";

/** The address of host `n` (1-based). */
export function hostAddress(n: number): string {
  return `10.213.7.${10 + n}`;
}

/** The address of NATS node `n` (1-based). */
export function natsAddress(n: number): string {
  return `10.213.7.${20 + n}`;
}

/** The namespace of host `n`. */
export function namespace(n: number): string {
  return `${PREFIX}h${n}`;
}

/** The root-side end of host `n`'s link (take it down to cut the host off). */
export function hostLink(n: number): string {
  return `${PREFIX}v${n}`;
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Why namespaces cannot be used here, or undefined when they can (tries to make and remove one). */
export function namespacesUnavailable(): string | undefined {
  if (process.platform !== "linux") return `network namespaces are Linux only (this is ${process.platform})`;
  try {
    execFileSync("ip", ["-V"], { stdio: "ignore" });
  } catch {
    return "the ip command (iproute2) is not installed";
  }
  const probe = `${PREFIX}probe`;
  try {
    ip("netns", "add", probe);
    ip("netns", "del", probe);
    return undefined;
  } catch (error) {
    return `cannot create network namespaces here (${(error as { stderr?: Buffer }).stderr?.toString().trim() ?? String(error)}); run as root with CAP_NET_ADMIN`;
  }
}

/** Remove every namespace and link this file creates (also what a crashed earlier run left). */
export function removeHosts(): void {
  const namespaces = execFileSync("ip", ["netns", "list"], { encoding: "utf8" })
    .split("\n")
    .map((line) => line.split(" ")[0] ?? "")
    .filter((name) => name.startsWith(PREFIX));
  for (const name of namespaces) {
    try {
      ip("netns", "del", name);
    } catch {
      // already gone
    }
  }
  const links = execFileSync("ip", ["-o", "link", "show"], { encoding: "utf8" })
    .split("\n")
    .map((line) => /^\d+: ([^:@]+)/.exec(line)?.[1] ?? "")
    .filter((name) => name.startsWith(PREFIX));
  for (const name of links) {
    try {
      ip("link", "del", name);
    } catch {
      // deleted with its peer
    }
  }
}

function addNamespace(ns: string, rootEnd: string, inside: string, address: string): void {
  ip("netns", "add", ns);
  ip("link", "add", rootEnd, "type", "veth", "peer", "name", inside);
  ip("link", "set", inside, "netns", ns);
  ip("link", "set", rootEnd, "master", BRIDGE);
  ip("link", "set", rootEnd, "up");
  ip("-n", ns, "addr", "add", `${address}/24`, "dev", inside);
  ip("-n", ns, "link", "set", inside, "up");
  ip("-n", ns, "link", "set", "lo", "up");
}

/** Make the bridge, `hosts` host namespaces and `natsNodes` NATS node namespaces. */
export function createHosts(hosts: number, natsNodes: number): void {
  removeHosts();
  ip("link", "add", BRIDGE, "type", "bridge");
  ip("addr", "add", `${CONTROLLER_ADDRESS}/24`, "dev", BRIDGE);
  ip("link", "set", BRIDGE, "up");
  for (let n = 1; n <= hosts; n++) addNamespace(namespace(n), hostLink(n), `${PREFIX}e${n}`, hostAddress(n));
  for (let n = 1; n <= natsNodes; n++)
    addNamespace(natsNamespace(n), `${PREFIX}w${n}`, `${PREFIX}f${n}`, natsAddress(n));
}

/** The namespace of NATS node `n`. */
export function natsNamespace(n: number): string {
  return `${PREFIX}n${n}`;
}

/** Take host `n`'s link down (cut off) or up (healed). */
export function setLink(n: number, up: boolean): void {
  ip("link", "set", hostLink(n), up ? "up" : "down");
}

/** A process started inside host `n`'s namespace, with its output kept. */
export interface HostProcess {
  readonly child: ChildProcess;
  stdout: string;
  stderr: string;
  readonly exited: Promise<number | null>;
}

/** Run `command args…` inside namespace `ns` (`ip netns exec`, which execs it: the pid is the command's). */
export function runIn(
  ns: string,
  command: string,
  args: readonly string[],
  env: Record<string, string> = {},
): HostProcess {
  const child = spawn("ip", ["netns", "exec", ns, command, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const hp: HostProcess = {
    child,
    stdout: "",
    stderr: "",
    exited: new Promise((resolve) => child.once("exit", (code) => resolve(code))),
  };
  child.stdout?.on("data", (d: Buffer) => (hp.stdout += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (hp.stderr += d.toString()));
  return hp;
}
