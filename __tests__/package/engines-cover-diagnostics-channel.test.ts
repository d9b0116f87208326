/**
 * The package imports src/diagnostics.ts, which calls `diagnostics_channel.tracingChannel()` when
 * it is loaded (src/index.ts imports it through diagnostics-install.ts). Node added it in v19.9.0
 * and v18.19.0 (nodejs/node doc/api/diagnostics_channel.md, `tracingChannel(nameOrChannels)`:
 * "added: v19.9.0, v18.19.0"). On an older Node the import throws
 * "dc.tracingChannel is not a function", so `engines.node` must not admit one: its lowest version
 * must be at least 18.19.0.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const TRACING_CHANNEL_SINCE = [18, 19, 0] as const;

test("engines.node admits no Node without diagnostics_channel.tracingChannel (added in 18.19.0)", () => {
  const { engines } = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { engines: { node: string } };
  const lowest = /^>=\s*(\d+)\.(\d+)(?:\.(\d+))?$/.exec(engines.node.trim());
  expect(lowest).not.toBeNull();
  const version = [Number(lowest![1]), Number(lowest![2]), Number(lowest![3] ?? 0)];
  const atLeast = version[0]! > TRACING_CHANNEL_SINCE[0] || (version[0] === TRACING_CHANNEL_SINCE[0] && (version[1]! > TRACING_CHANNEL_SINCE[1] || (version[1] === TRACING_CHANNEL_SINCE[1] && version[2]! >= TRACING_CHANNEL_SINCE[2])));
  expect({ engines: engines.node, admitsNodeWithoutTracingChannel: !atLeast }).toEqual({ engines: engines.node, admitsNodeWithoutTracingChannel: false });
});
