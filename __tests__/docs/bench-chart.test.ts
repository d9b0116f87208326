/**
 * The benchmark chart (bench/svg.ts, issue 11 item 8): the committed bench/results/latest.svg is
 * the rendering of latest.json; no text runs off the canvas (the backend line used to); every
 * latency section shows p50 and p99 (the handoff showed only p50, so polling looked 3.5× better
 * than change streams while its p99 was 30× worse); sections appear in order 1 to 5.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { readLatestResults } from '../../bench/readme-tables';
import { CHART_WIDTH, renderSvg, wrap } from '../../bench/svg';

const results = readLatestResults();
const svg = renderSvg(results);

/** A conservative width for 12 px sans-serif text (DejaVu Sans averages about 7 px a character). */
const charWidth = (fontSize: number) => 7.2 * (fontSize / 12);

interface Text {
  x: number;
  anchor: string;
  fontSize: number;
  content: string;
}

function texts(markup: string): Text[] {
  return [...markup.matchAll(/<text([^>]*)>([^<]*)<\/text>/g)].map((m) => {
    const attributes = m[1]!;
    const attribute = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(attributes)?.[1];
    const content = m[2]!.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
    return { x: Number(attribute('x')), anchor: attribute('text-anchor') ?? 'start', fontSize: Number(attribute('font-size') ?? 12), content };
  });
}

test('the committed chart is the rendering of the committed results', () => {
  expect(readFileSync(join(__dirname, '..', '..', 'bench', 'results', 'latest.svg'), 'utf8')).toBe(svg);
});

test('no text runs off the canvas', () => {
  const overflowing = texts(svg).filter((text) => {
    const width = text.content.length * charWidth(text.fontSize);
    return text.anchor === 'end' ? text.x - width < 0 : text.x + width > CHART_WIDTH;
  });
  expect(overflowing.map((text) => text.content)).toEqual([]);
  // The backend description is long; it is wrapped, not cut.
  expect(texts(svg).map((t) => t.content).join(' ')).toContain(wrap(results.backend, CHART_WIDTH - 20).join(' '));
});

test('latency sections show p50 and p99; the handoff shows both for each mode', () => {
  const contents = texts(svg).map((t) => t.content);
  for (const handoff of results.handoff) {
    expect(contents).toContain(`${handoff.mode} p50`);
    expect(contents).toContain(`${handoff.mode} p99`);
    expect(contents).toContain(`${handoff.p99} ms`);
  }
  for (const row of results.cycle) expect(contents).toContain(`${row.name} p99`);
});

test('sections are numbered in order', () => {
  const numbers = texts(svg)
    .map((t) => /^(\d+)[a-z]?\. /.exec(t.content)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number);
  expect(numbers).toEqual([...numbers].sort((a, b) => a - b));
  expect(new Set(numbers)).toEqual(new Set([1, 2, 3, 4, 5]));
});
