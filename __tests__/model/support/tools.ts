/** Whether spin and gcc are on PATH (the model checks and the replays need both). */
import { spawnSync } from 'node:child_process';

export function hasTool(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

export function hasSpin(): boolean {
  return hasTool('spin') && hasTool('gcc');
}
