/**
 * Child processes for the reliability tests: TypeScript worker scripts run by `node --import tsx`,
 * each bounded by a timeout (SIGKILL when it passes) and killed by `killAll()` in afterAll.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

export interface Child {
  process: ChildProcess;
  /** Complete stdout lines received so far. */
  lines: string[];
  /** Resolves when the next stdout line arrives (for interactive workers). */
  nextLine(timeoutMs: number): Promise<string>;
  /** Resolves with the exit code (or the signal's name) when the process ends. */
  exited: Promise<number | string>;
  stderr(): string;
}

const running = new Set<ChildProcess>();

export function workerPath(name: string): string {
  return join(__dirname, '..', 'workers', name);
}

/**
 * Spawns `node --import tsx <script>` with `env` added to the environment. The child is killed
 * with SIGKILL if it is still running after `timeoutMs`.
 */
export function spawnWorker(script: string, env: Record<string, string>, timeoutMs: number): Child {
  const child = spawn(process.execPath, ['--import', 'tsx', workerPath(script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  const lines: string[] = [];
  const waiters: ((line: string) => void)[] = [];
  let buffered = '';
  let errors = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      lines.push(line);
      waiters.shift()?.(line);
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
    errors = (errors + chunk).slice(-20_000);
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve(code ?? signal ?? 'unknown');
    });
  });
  let consumed = 0;
  return {
    process: child,
    lines,
    exited,
    stderr: () => errors,
    nextLine: (ms) => {
      if (consumed < lines.length) return Promise.resolve(lines[consumed++]);
      return new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`no line from ${script} within ${ms} ms; stderr: ${errors}`)), ms);
        waiters.push((line) => {
          clearTimeout(t);
          consumed++;
          resolve(line);
        });
        void exited.then((code) => {
          clearTimeout(t);
          reject(new Error(`${script} exited (${code}) before printing a line; stderr: ${errors}`));
        });
      });
    },
  };
}

/** Kills every child still running (afterAll). */
export async function killAll(): Promise<void> {
  const pending = [...running].map((child) => new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  }));
  await Promise.all(pending);
}
