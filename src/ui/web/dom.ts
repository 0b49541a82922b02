/**
 * Building DOM nodes. Every string becomes a text node (`textContent`), never markup: run names,
 * metric keys and sample text come from users' jobs and must not be able to run anything here.
 */
type Child = Node | string | number | null | undefined | false;

/** Create an element with properties/attributes and text-or-node children. */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Record<string, string | number | boolean | undefined> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === false) continue;
    if (name === "className") node.className = String(value);
    else if (name.startsWith("data-")) node.setAttribute(name, String(value));
    else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  append(node, ...children);
  return node;
}

/** Append children, strings as text. */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(
      typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child,
    );
  }
}

/** Remove every child. */
export function clear(node: Node): void {
  while (node.firstChild !== null) node.removeChild(node.firstChild);
}

/** A value as display text: strings as they are, everything else as JSON. */
export function displayText(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : String(value);
  if (value === undefined) return "";
  return JSON.stringify(value);
}

/** `1h 02m`, `3m 05s`, `12s` */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "";
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  if (h > 0) return `${h}h ${String(m).padStart(2, "0")}m`;
  if (m > 0) return `${m}m ${String(sec).padStart(2, "0")}s`;
  return `${sec}s`;
}

/** Local date and time, `2026-11-22 01:48:35`. */
export function formatTime(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return "";
  const d = new Date(ms);
  const p = (n: number): string => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** A run's start: time only today, month and day this year, the full date otherwise. */
export function formatStart(ms: number | null, now = new Date()): string {
  if (ms === null || !Number.isFinite(ms)) return "";
  const full = formatTime(ms);
  const d = new Date(ms);
  if (d.toDateString() === now.toDateString()) return full.slice(11, 16);
  if (d.getFullYear() === now.getFullYear()) return full.slice(5, 16);
  return full.slice(0, 10);
}

/** `1.2 MB` */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}
