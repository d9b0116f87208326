/**
 * A small hand-written SVG bar chart of the benchmark results (no charting dependency).
 * Sections appear in the benchmarks' order (1 to 5). Latency distributions show p50 and p99
 * side by side: a median alone hides tails (polling's handoff p50 is low, its p99 is not).
 * Every text is kept inside the canvas (long texts are wrapped), which
 * __tests__/docs/bench-chart.test.ts checks with a conservative width estimate.
 */
import type { BenchResults } from './run';

export const CHART_WIDTH = 960;
const FONT_SIZE = 12;
/** Conservative average advance of a 12 px sans-serif character (bold included), for wrapping. */
export const CHAR_WIDTH = 7.5;

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

interface Bar {
  label: string;
  value: number;
  highlight?: boolean;
}

/** Splits `text` into lines that fit `width` pixels at CHAR_WIDTH per character. */
export function wrap(text: string, width: number): string[] {
  const max = Math.max(10, Math.floor(width / CHAR_WIDTH));
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    for (let rest = word; rest.length > 0; ) {
      const room = line === '' ? max : max - line.length - 1;
      if (rest.length <= room) {
        line = line === '' ? rest : `${line} ${rest}`;
        rest = '';
      } else if (line !== '') {
        lines.push(line);
        line = '';
      } else {
        lines.push(rest.slice(0, max)); // a word longer than a line (a URI) is cut across lines
        rest = rest.slice(max);
      }
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

function textLines(lines: string[], x: number, top: number, attributes = ''): { svg: string; height: number } {
  const lineHeight = FONT_SIZE + 4;
  const svg = lines.map((line, i) => `<text x="${x}" y="${top + 12 + i * lineHeight}"${attributes}>${escape(line)}</text>`).join('');
  return { svg, height: lines.length * lineHeight };
}

/** One horizontal bar group: title, bars scaled to the group's maximum, values printed at the bar ends. */
function group(title: string, unit: string, bars: Bar[], top: number): { svg: string; height: number } {
  // Wide enough for the longest bar label (the Mongoose-load row with " p50", 70 characters).
  const left = 540;
  const width = 325;
  const rowHeight = 22;
  const max = Math.max(...bars.map((b) => b.value), 1e-9);
  let svg = `<text x="10" y="${top + 16}" font-weight="bold">${escape(title)}</text>`;
  bars.forEach((bar, i) => {
    const y = top + 28 + i * rowHeight;
    const w = Number.isFinite(bar.value) ? Math.max(1, (bar.value / max) * width) : 0;
    svg += `<text x="${left - 8}" y="${y + 14}" text-anchor="end">${escape(bar.label)}</text>`;
    svg += `<rect x="${left}" y="${y + 2}" width="${w.toFixed(1)}" height="${rowHeight - 6}" fill="${bar.highlight ? '#2b6cb0' : '#a0aec0'}"/>`;
    svg += `<text x="${(left + w + 6).toFixed(1)}" y="${y + 14}">${escape(Number.isFinite(bar.value) ? `${bar.value}${unit ? ` ${unit}` : ''}` : 'n/a')}</text>`;
  });
  return { svg, height: 36 + bars.length * rowHeight };
}

export function renderSvg(results: BenchResults): string {
  const plugin = (name: string) => name.startsWith('plugin');
  const sections: ({ kind: 'bars'; title: string; unit: string; bars: Bar[] } | { kind: 'text'; text: string })[] = [
    {
      kind: 'bars',
      title: '1a. Lock + unlock cycle latency, p50 and p99 (lower is better)',
      unit: 'ms',
      bars: results.cycle.flatMap((r) => [
        { label: `${r.name} p50`, value: r.p50, highlight: plugin(r.name) },
        { label: `${r.name} p99`, value: r.p99, highlight: plugin(r.name) },
      ]),
    },
    { kind: 'bars', title: '1b. Lock + unlock cycles per second (higher is better)', unit: '/s', bars: results.cycle.map((r) => ({ label: r.name, value: r.opsPerSec, highlight: plugin(r.name) })) },
    { kind: 'bars', title: '2. Database commands per operation', unit: '', bars: results.commands.map((c) => ({ label: c.operation, value: c.count, highlight: true })) },
    {
      kind: 'bars',
      title: `3. Handoff gap, release -> next holder, ${results.handoff[0]?.waiters ?? '?'} waiters, p50 and p99 (lower is better)`,
      unit: 'ms',
      bars: results.handoff.flatMap((h) => [
        { label: `${h.mode} p50`, value: h.p50, highlight: h.mode === 'change streams' },
        { label: `${h.mode} p99`, value: h.p99, highlight: h.mode === 'change streams' },
      ]),
    },
    { kind: 'text', text: `4. releaseAllFor: ${results.releaseAll.released} locks released in ${results.releaseAll.ms} ms by one command (${results.releaseAll.locksPerSec} locks/s)` },
    {
      kind: 'bars',
      title: `5. Model.lock latency, empty lock collection vs ${results.acquireScale.otherLocks} other locks`,
      unit: 'ms',
      bars: [
        { label: 'empty lock collection p50', value: results.acquireScale.empty.p50 },
        { label: 'empty lock collection p99', value: results.acquireScale.empty.p99 },
        { label: `${results.acquireScale.otherLocks} other locks p50`, value: results.acquireScale.full.p50, highlight: true },
        { label: `${results.acquireScale.otherLocks} other locks p99`, value: results.acquireScale.full.p99, highlight: true },
      ],
    },
  ];
  const header = textLines(wrap(results.backend, CHART_WIDTH - 20), 10, 28, ' fill="#555"');
  let body = header.svg;
  let y = 28 + header.height + 12;
  for (const section of sections) {
    if (section.kind === 'bars') {
      const g = group(section.title, section.unit, section.bars, y);
      body += g.svg;
      y += g.height + 10;
    } else {
      const t = textLines(wrap(section.text, CHART_WIDTH - 20), 10, y + 4, ' font-weight="bold"');
      body += t.svg;
      y += t.height + 18;
    }
  }
  const height = y + 10;
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${CHART_WIDTH}" height="${height}" font-family="sans-serif" font-size="${FONT_SIZE}">` +
    `<rect width="100%" height="100%" fill="white"/>` +
    `<text x="10" y="20" font-size="15" font-weight="bold">mongoose-pessimistic-lock benchmarks (${escape(results.when)})</text>` +
    `${body}</svg>\n`
  );
}
