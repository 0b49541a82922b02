/**
 * A long-running command started through npm stops with npm. `npx rankscope ui` (or `npm exec`,
 * or an npm script) runs npm, which runs `sh -c`, which runs this process. Stopping npm by its
 * pid (`kill <pid>`, what a supervisor or a script that started it does) ends npm and the shell,
 * but npm does not pass the signal on to this process: it would be re-parented and keep serving,
 * holding its port. So when npm started it, the command watches its parent, and when the parent
 * is gone it stops itself with SIGTERM, through the one lifecycle (src/core/lifecycle.ts: the
 * drains run, then exit code 0) as if it had been sent the signal. A process started any other
 * way (`nohup`, a service manager, a shell) is left to live on its own, as such processes expect.
 */

/** How often the parent is looked at (a pid read, no I/O). */
const WATCH_INTERVAL_MS = 500;

/** Stop this process with SIGTERM once the npm process that started it has ended (nothing when npm did not start it). */
export function stopWithNpmLauncher(env: NodeJS.ProcessEnv = process.env): void {
  // npm sets `npm_command` (`exec` for npx and npm exec, `run-script`, …) for what it starts.
  if (env["npm_command"] === undefined) return;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    process.kill(process.pid, "SIGTERM");
  }, WATCH_INTERVAL_MS);
  timer.unref();
}
