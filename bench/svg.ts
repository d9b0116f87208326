/** A small hand-written SVG bar chart of the benchmark results (no charting dependency). */
import type { BenchResults } from './run';

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Bar {
  label: string;
  value: number;
  highlight?: boolean;
}

/** One horizontal bar group: title, bars scaled to the group's maximum, values printed at the bar ends. */
function group(title: string, unit: string, bars: Bar[], top: number): { svg: string; height: number } {
  const left = 330;
  const width = 360;
  const rowHeight = 22;
  const max = Math.max(...bars.map((b) => b.value), 1e-9);
  let svg = `<text x="10" y="${top + 16}" font-weight="bold">${escape(title)}</text>`;
  bars.forEach((bar, i) => {
    const y = top + 28 + i * rowHeight;
    const w = Number.isFinite(bar.value) ? Math.max(1, (bar.value / max) * width) : 0;
    svg += `<text x="${left - 8}" y="${y + 14}" text-anchor="end">${escape(bar.label)}</text>`;
    svg += `<rect x="${left}" y="${y + 2}" width="${w.toFixed(1)}" height="${rowHeight - 6}" fill="${bar.highlight ? '#2b6cb0' : '#a0aec0'}"/>`;
    svg += `<text x="${left + w + 6}" y="${y + 14}">${escape(Number.isFinite(bar.value) ? `${bar.value} ${unit}` : 'n/a')}</text>`;
  });
  return { svg, height: 36 + bars.length * rowHeight };
}

export function renderSvg(results: BenchResults): string {
  const groups: [string, string, Bar[]][] = [
    ['1. Lock + unlock cycle, p50 latency (lower is better)', 'ms', results.cycle.map((r) => ({ label: r.name, value: r.p50, highlight: r.name.startsWith('plugin') }))],
    ['1. Lock + unlock cycles per second (higher is better)', '/s', results.cycle.map((r) => ({ label: r.name, value: r.opsPerSec, highlight: r.name.startsWith('plugin') }))],
    ['2. Database commands per operation', '', results.commands.map((c) => ({ label: c.operation, value: c.count, highlight: true }))],
    ['3. Handoff gap p50, release -> next holder (lower is better)', 'ms', results.handoff.map((h) => ({ label: h.mode, value: h.p50, highlight: h.mode === 'change streams' }))],
    [
      `5. Model.lock p50 latency, empty vs ${results.acquireScale.otherLocks} other locks`,
      'ms',
      [
        { label: 'empty lock collection', value: results.acquireScale.empty.p50 },
        { label: `${results.acquireScale.otherLocks} other locks`, value: results.acquireScale.full.p50, highlight: true },
      ],
    ],
  ];
  let body = '';
  let y = 50;
  for (const [title, unit, bars] of groups) {
    const g = group(title, unit, bars, y);
    body += g.svg;
    y += g.height + 10;
  }
  const footer = `4. releaseAllFor: ${results.releaseAll.released} locks in ${results.releaseAll.ms} ms (one command)`;
  body += `<text x="10" y="${y + 10}" font-weight="bold">${escape(footer)}</text>`;
  const height = y + 30;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="820" height="${height}" font-family="sans-serif" font-size="12">` +
    `<rect width="100%" height="100%" fill="white"/>` +
    `<text x="10" y="20" font-size="15" font-weight="bold">mongoose-pessimistic-lock benchmarks (${escape(results.when)})</text>` +
    `<text x="10" y="38" fill="#555">${escape(results.backend.slice(0, 130))}</text>` +
    `${body}</svg>\n`
  );
}
