/**
 * Schedules from the model: the events a spin trail or a random simulation prints (spec/*.pml,
 * `printf("EV ...")`), turned into steps with real times.
 *
 * Model time is in ticks, and every event of one tick happens at the same instant; a real run
 * needs real instants. A step at tick k runs at k * tickMs + an offset within the tick, the
 * offsets growing in the model's order. Where the model compares two instants exactly ttl ticks
 * apart (an expiry set at tick k and a $$NOW read at tick k + ttl: "expiresAt <= $$NOW" holds;
 * a lease sent at tick k and a reply at k + ttl: it is over), the later one must also be later
 * within its tick, so every offset in tick k + ttl is placed after every offset in tick k.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ModelEvent {
  /** The model's client (undefined for tick and purge). */
  client: number | undefined;
  kind: string;
  args: Record<string, number>;
  raw: string;
}

export interface Step extends ModelEvent {
  tick: number;
  /** Milliseconds from the start of the replay. */
  at: number;
}

export function parseEvents(lines: readonly string[]): ModelEvent[] {
  return lines
    .map((line) => line.trim())
    .filter((line) => line.length > 0)
    .map((line) => {
      const words = line.split(/\s+/);
      let client: number | undefined;
      const args: Record<string, number> = {};
      let kind = '';
      for (const word of words) {
        const eq = word.indexOf('=');
        if (eq < 0) {
          kind = word;
          continue;
        }
        const key = word.slice(0, eq);
        const value = Number(word.slice(eq + 1).split(',')[0]);
        if (key === 'c') client = value;
        else args[key] = value;
      }
      return { client, kind, args, raw: line };
    });
}

/** Drops the idle ticks after the last client event (a simulation ends by ticking on). */
export function trimmed(events: readonly ModelEvent[]): ModelEvent[] {
  let last = events.length - 1;
  while (last >= 0 && events[last].client === undefined) last--;
  return events.slice(0, last + 1);
}

export function timeline(events: readonly ModelEvent[], options: { ttl: number; tickMs: number; slotMs: number }): Step[] {
  const steps: Step[] = [];
  let tick = 0;
  for (const event of events) {
    if (event.kind === 'tick') {
      tick++;
      continue;
    }
    steps.push({ ...event, tick, at: 0 });
  }
  // Only a step that starts a time (a send, a grant or extension executing) constrains the tick
  // ttl later: its steps must come after it within their tick. Other ticks start at offset 0.
  const STARTS = new Set(['lock-send', 'lock-exec', 'extend-send', 'extend-exec', 'resume-send', 'resume-exec', 'check-verify', 'check-blocking']);
  const lastStarter: number[] = [];
  steps.forEach((step, i) => {
    if (STARTS.has(step.kind)) lastStarter[step.tick] = i - steps.findIndex((s) => s.tick === step.tick);
  });
  const base: number[] = [];
  const baseOf = (t: number): number => {
    if (base[t] !== undefined) return base[t];
    const before = t - options.ttl;
    base[t] = before >= 0 && lastStarter[before] !== undefined ? baseOf(before) + (lastStarter[before] + 1) * options.slotMs : 0;
    return base[t];
  };
  let previousTick = -1;
  let index = 0;
  for (const step of steps) {
    if (step.tick !== previousTick) {
      index = 0;
      previousTick = step.tick;
    }
    const offset = baseOf(step.tick) + index * options.slotMs;
    if (offset > options.tickMs * 0.8) throw new Error(`schedule too dense: tick ${step.tick} needs an offset of ${offset} ms (tick ${options.tickMs} ms)`);
    step.at = step.tick * options.tickMs + offset;
    index++;
  }
  return steps;
}

const SPEC = join(__dirname, '..', '..', '..', 'spec');

/** Runs `fn` in a temporary copy of spec/. */
function inSpecCopy<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'mpl-replay-'));
  try {
    for (const file of readdirSync(SPEC)) if (file.endsWith('.pml')) copyFileSync(join(SPEC, file), join(dir, file));
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function eventLines(output: string): string[] {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('EV '))
    .map((line) => line.slice(3));
}

/** The counterexample spin finds for `model` with `defines` (its events), or undefined if none. */
export function counterexample(model: string, defines: readonly string[]): ModelEvent[] | undefined {
  return inSpecCopy((dir) => {
    const run = (cmd: string, args: string[]) => execFileSync(cmd, args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
    run('spin', [...defines, '-a', model]);
    run('gcc', ['-O1', '-w', '-DSAFETY', '-DMEMLIM=1024', '-o', 'pan', 'pan.c']);
    const pan = spawnSync('./pan', ['-m100000'], { cwd: dir, encoding: 'utf8', maxBuffer: 64 << 20 });
    if (!/errors: [1-9]/.test(pan.stdout)) return undefined;
    return parseEvents(eventLines(run('spin', [...defines, '-t', model])));
  });
}

/** A random run of `model` (spin's simulation with `seed`), cut after its last client event. */
export function simulation(model: string, defines: readonly string[], seed: number, steps = 3000): ModelEvent[] {
  return inSpecCopy((dir) => {
    const out = execFileSync('spin', [...defines, `-n${seed}`, `-u${steps}`, model], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
    return trimmed(parseEvents(eventLines(out)));
  });
}
