/**
 * Latency-distribution plot in the style of HdrHistogram's plotter: x is the percentile on a
 * log scale of 1/(1−p) (so 90 %, 99 %, 99.9 % … are evenly spaced and the tail gets the room
 * it deserves), y is latency on a log scale (the harness floor and the end-to-end curve are
 * orders of magnitude apart). Plain SVG, no script, no external resources.
 */
import type { PlotSeries } from './summary.js';

const WIDTH = 900;
const PLOT_HEIGHT = 370;
const MARGIN = { left: 70, right: 20, top: 40, bottom: 60 };
const LEGEND_COLUMNS = 2;
const LEGEND_ROW = 18;
const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f'];
const PERCENTILE_LABELS = ['0%', '90%', '99%', '99.9%', '99.99%', '99.999%', '99.9999%'];

/** Escapes text for XML content and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;', "'": '&apos;' })[c]!);
}

/** Decades of 1/(1−p): 0 at p=0, 1 at 90 %, 2 at 99 %… p=100 is not representable and is skipped. */
function decades(percentile: number): number {
  return Math.log10(1 / (1 - percentile / 100));
}

function fmt(n: number): string {
  return Number(n.toFixed(2)).toString();
}

function msLabel(ms: number): string {
  if (ms >= 1000) return `${fmt(ms / 1000)} s`;
  if (ms >= 1) return `${fmt(ms)} ms`;
  return `${fmt(ms * 1000)} µs`;
}

/** Renders the series as one SVG document (well-formed XML). */
export function renderLatencySvg(title: string, series: PlotSeries[]): string {
  const drawable = series
    .map((s) => ({ ...s, points: s.points.filter((p) => p.percentile < 100 && p.valueMs > 0) }))
    .filter((s) => s.points.length > 0);
  const maxDecade = Math.max(1, Math.min(6, Math.ceil(Math.max(0, ...drawable.flatMap((s) => s.points.map((p) => decades(p.percentile)))))));
  const values = drawable.flatMap((s) => s.points.map((p) => p.valueMs));
  const yMinExp = values.length ? Math.floor(Math.log10(Math.min(...values))) : -1;
  const yMaxExp = values.length ? Math.max(yMinExp + 1, Math.ceil(Math.log10(Math.max(...values)))) : 2;

  const legendRows = Math.ceil(drawable.length / LEGEND_COLUMNS);
  const HEIGHT = MARGIN.top + PLOT_HEIGHT + MARGIN.bottom + legendRows * LEGEND_ROW;
  const plotW = WIDTH - MARGIN.left - MARGIN.right;
  const plotH = PLOT_HEIGHT;
  const x = (p: number): number => MARGIN.left + (decades(p) / maxDecade) * plotW;
  const y = (ms: number): number => MARGIN.top + plotH - ((Math.log10(ms) - yMinExp) / (yMaxExp - yMinExp)) * plotH;

  const out: string[] = [];
  out.push(`<?xml version="1.0" encoding="UTF-8"?>`);
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<title>${escapeXml(title)}</title>`);
  out.push(`<rect x="0" y="0" width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`);
  out.push(`<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15">${escapeXml(title)}</text>`);

  // Grid and axes.
  for (let d = 0; d <= maxDecade; d++) {
    const gx = MARGIN.left + (d / maxDecade) * plotW;
    out.push(`<line x1="${fmt(gx)}" y1="${MARGIN.top}" x2="${fmt(gx)}" y2="${MARGIN.top + plotH}" stroke="#dddddd"/>`);
    out.push(`<text x="${fmt(gx)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${PERCENTILE_LABELS[d] ?? ''}</text>`);
  }
  for (let e = yMinExp; e <= yMaxExp; e++) {
    const gy = y(Math.pow(10, e));
    out.push(`<line x1="${MARGIN.left}" y1="${fmt(gy)}" x2="${MARGIN.left + plotW}" y2="${fmt(gy)}" stroke="#dddddd"/>`);
    out.push(`<text x="${MARGIN.left - 6}" y="${fmt(gy + 4)}" text-anchor="end">${escapeXml(msLabel(Math.pow(10, e)))}</text>`);
  }
  out.push(
    `<rect x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none" stroke="#333333"/>`,
  );
  out.push(`<text x="${MARGIN.left + plotW / 2}" y="${MARGIN.top + plotH + 34}" text-anchor="middle">percentile</text>`);
  out.push(
    `<text x="16" y="${MARGIN.top + plotH / 2}" text-anchor="middle" transform="rotate(-90 16 ${MARGIN.top + plotH / 2})">latency (log scale)</text>`,
  );

  drawable.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const pts = s.points.map((p) => `${fmt(x(p.percentile))},${fmt(y(p.valueMs))}`).join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${pts}"/>`);
    const lx = MARGIN.left + (i % LEGEND_COLUMNS) * (plotW / LEGEND_COLUMNS);
    const ly = MARGIN.top + plotH + 56 + Math.floor(i / LEGEND_COLUMNS) * LEGEND_ROW;
    out.push(`<line x1="${fmt(lx)}" y1="${ly - 4}" x2="${fmt(lx + 24)}" y2="${ly - 4}" stroke="${color}" stroke-width="3"/>`);
    out.push(`<text x="${fmt(lx + 30)}" y="${ly}">${escapeXml(s.label)}</text>`);
  });
  if (drawable.length === 0) {
    out.push(`<text x="${WIDTH / 2}" y="${HEIGHT / 2}" text-anchor="middle">no latency samples</text>`);
  }
  out.push(`</svg>`);
  return `${out.join('\n')}\n`;
}
