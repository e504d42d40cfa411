/**
 * `md/getChart` for the paper market: reads the request (chartDescription, timeRange), builds
 * the history from the contract's tape and formats Tradovate chart packets (`bars`, or the
 * compact tick form `bp/bt/ts/tks`), then keeps one live bar per subscription up to date.
 *
 * History older than the tape (the broker has not been running that long) is synthetic: the
 * same random walk, run backwards from where the tape starts, seeded per contract and bar size
 * so that asking twice gives the same bars. It is generated once per (contract, resolution) and
 * kept, at most MAX_ELEMENTS bars or ticks.
 */
import { roundToTick } from './contracts.js';
import { addToBar, newBar, type Bar, type ContractTape, type Tick } from './market.js';
import { seededRandom } from './prices.js';
import { sessionAt, type SessionMode } from './sessions.js';

/** Most bars or ticks one request returns. */
export const MAX_ELEMENTS = 5000;
const MINUTE = 60_000;
const DAY = 86_400_000;
const PACKET = 500;

/** What a chart shows: ticks, N-minute bars or daily bars. */
export type Resolution = { kind: 'ticks' } | { kind: 'minutes'; size: number } | { kind: 'daily' };

/** A parsed `md/getChart` body. */
export interface ChartRequest {
  resolution: Resolution;
  count: number;
  /** Oldest time wanted (asFarAsTimestamp). */
  from?: number;
  /** Newest time wanted (closestTimestamp; default now). */
  to: number;
}

/** Settings of the chart builder. */
export interface ChartContext {
  seed: number;
  sessions: SessionMode;
  /** Average ms between two walk steps; sets the volatility of synthetic history. */
  stepMs: number;
}

type Body = Record<string, unknown>;

function timeOf(v: unknown, field: string): number | string | undefined {
  if (v === undefined || v === null) return undefined;
  const t = typeof v === 'number' ? v : typeof v === 'string' ? Date.parse(v) : Number.NaN;
  return Number.isFinite(t) ? t : `Invalid value for timeRange.${field}: ${String(v)}`;
}

/** Reads a getChart body; a string is the 400 text. */
export function parseChartRequest(body: Body, now: number): ChartRequest | string {
  const desc = body.chartDescription;
  if (!desc || typeof desc !== 'object') return 'No usable value for chartDescription';
  const d = desc as Body;
  const unit = d.elementSizeUnit ?? 'UnderlyingUnits';
  if (unit !== 'UnderlyingUnits') return `elementSizeUnit ${String(unit)} is not supported by the paper broker (UnderlyingUnits only)`;
  const size = d.elementSize === undefined ? 1 : Number(d.elementSize);
  if (!Number.isInteger(size) || size < 1) return `Invalid value for chartDescription.elementSize: ${String(d.elementSize)}`;
  let resolution: Resolution;
  if (d.underlyingType === 'MinuteBar') {
    if (size > 1440) return 'MinuteBar elementSize must be at most 1440';
    resolution = { kind: 'minutes', size };
  } else if (d.underlyingType === 'Tick' || d.underlyingType === 'DailyBar') {
    if (size !== 1) return `${d.underlyingType} charts take elementSize 1`;
    resolution = d.underlyingType === 'Tick' ? { kind: 'ticks' } : { kind: 'daily' };
  } else return `underlyingType ${String(d.underlyingType)} is not supported by the paper broker (Tick, MinuteBar, DailyBar)`;
  const range = body.timeRange && typeof body.timeRange === 'object' ? (body.timeRange as Body) : {};
  const closest = timeOf(range.closestTimestamp, 'closestTimestamp');
  // The tutorials spell it both ways.
  const farField = range.asFarAsTimestamp !== undefined ? 'asFarAsTimestamp' : 'asFarAsTimeStamp';
  const far = timeOf(range[farField], farField);
  if (typeof closest === 'string') return closest;
  if (typeof far === 'string') return far;
  const many = range.asMuchAsElements === undefined ? undefined : Number(range.asMuchAsElements);
  if (many !== undefined && (!Number.isInteger(many) || many < 1)) return `Invalid value for timeRange.asMuchAsElements: ${String(range.asMuchAsElements)}`;
  if (closest === undefined && far === undefined && many === undefined && range.closestTickId === undefined) {
    return 'timeRange needs one of closestTimestamp, closestTickId, asFarAsTimestamp, asMuchAsElements';
  }
  return { resolution, count: Math.min(many ?? MAX_ELEMENTS, MAX_ELEMENTS), from: far, to: Math.min(closest ?? now, now) };
}

/** Trade date (YYYYMMDD) of a moment, and its midnight UTC as a daily bar's time. */
function tradeDay(sessions: SessionMode, t: number): { key: number; t: number } {
  const td = sessionAt(sessions, t).tradeDate;
  return { key: td.year * 10_000 + td.month * 100 + td.day, t: Date.UTC(td.year, td.month - 1, td.day) };
}

/** Bucket start of a moment at a bar resolution. */
export function bucketOf(ctx: ChartContext, res: Resolution, t: number): number {
  if (res.kind === 'minutes') return Math.floor(t / (res.size * MINUTE)) * res.size * MINUTE;
  return tradeDay(ctx.sessions, t).t;
}

function gaussian(random: () => number): number {
  const u = Math.max(random(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
}

interface Synthetic {
  bars: Bar[];
  ticks: Tick[];
}

const synthetic = new WeakMap<ContractTape, Map<string, Synthetic>>();

function syntheticOf(tape: ContractTape, key: string): Synthetic {
  let byKey = synthetic.get(tape);
  if (!byKey) synthetic.set(tape, (byKey = new Map()));
  let s = byKey.get(key);
  if (!s) byKey.set(key, (s = { bars: [], ticks: [] }));
  return s;
}

/** Extends the synthetic bars before the tape (newest first) to at least `n`. */
function syntheticBars(ctx: ChartContext, tape: ContractTape, res: Resolution, n: number): Bar[] {
  const key = res.kind === 'minutes' ? `m${res.size}` : 'd';
  const s = syntheticOf(tape, key);
  if (s.bars.length >= n) return s.bars;
  const random = seededRandom((ctx.seed * 31 + tape.contractId * 7 + (res.kind === 'minutes' ? res.size : 100_000)) >>> 0);
  for (let i = 0; i < s.bars.length; i++) random(); // resume the sequence deterministically
  const minutes = res.kind === 'minutes' ? res.size : 1380;
  // The walk moves one tick with probability 2/3 per step: spread the bar's variance over a few legs.
  const legs = 12;
  const legSd = Math.sqrt(((minutes * MINUTE) / ctx.stepMs) * (2 / 3) / legs);
  const tick = tape.tickSize;
  while (s.bars.length < Math.min(n, MAX_ELEMENTS)) {
    const later = s.bars[s.bars.length - 1];
    const close = later ? later.open : tape.startPrice;
    let t: number;
    if (res.kind === 'minutes') t = (later ? later.t : bucketOf(ctx, res, tape.startedAt)) - res.size * MINUTE;
    else {
      t = (later ? later.t : bucketOf(ctx, res, tape.startedAt)) - DAY;
      while ([0, 6].includes(new Date(t).getUTCDay())) t -= DAY;
    }
    // Walk in whole ticks and convert once: rounding every leg to the tick is the expensive part.
    const closeTicks = Math.round(close / tick);
    let ticks = closeTicks;
    let highTicks = ticks;
    let lowTicks = ticks;
    for (let k = 0; k < legs; k++) {
      ticks = Math.max(1, ticks + Math.round(gaussian(random) * legSd));
      if (ticks > highTicks) highTicks = ticks;
      if (ticks < lowTicks) lowTicks = ticks;
    }
    const price = roundToTick(ticks * tick, tick);
    const high = roundToTick(highTicks * tick, tick);
    const low = roundToTick(lowTicks * tick, tick);
    const volume = Math.round(minutes * 40 * (0.5 + random()));
    const up = Math.round(volume * (close >= price ? 0.55 : 0.45));
    s.bars.push({ t, open: price, high, low, close, upVolume: up, downVolume: volume - up, upTicks: Math.round(up / 5), downTicks: Math.round((volume - up) / 5), bidVolume: volume - up, offerVolume: up });
  }
  return s.bars;
}

/** Extends the synthetic ticks before the tape (newest first) to at least `n`. */
function syntheticTicks(ctx: ChartContext, tape: ContractTape, n: number): Tick[] {
  const s = syntheticOf(tape, 't');
  if (s.ticks.length >= n) return s.ticks;
  const random = seededRandom((ctx.seed * 31 + tape.contractId * 7 + 7) >>> 0);
  for (let i = 0; i < s.ticks.length; i++) random();
  const gap = Math.round(ctx.stepMs * 1.5);
  while (s.ticks.length < Math.min(n, MAX_ELEMENTS)) {
    const later = s.ticks[s.ticks.length - 1];
    const price = later ? Math.max(tape.tickSize, roundToTick(later.price + (random() < 0.5 ? -1 : 1) * tape.tickSize, tape.tickSize)) : tape.startPrice;
    s.ticks.push({ id: 1_000_000 - s.ticks.length, t: (later ? later.t : tape.startedAt) - gap, price, size: 1 + Math.floor(random() * 10) });
  }
  return s.ticks;
}

/** Recorded one-minute bars rolled up into the requested resolution (oldest first). */
function recordedBars(ctx: ChartContext, tape: ContractTape, res: Resolution): Bar[] {
  const out: Bar[] = [];
  // A daily bucket only changes on an hour boundary: one session lookup per hour, not per minute.
  let hour = Number.NaN;
  let hourBucket = 0;
  for (let i = 0; i < tape.minutes.length; i++) {
    const m = tape.minutes.at(i)!;
    let t: number;
    if (res.kind === 'minutes') t = bucketOf(ctx, res, m.t);
    else {
      const h = Math.floor(m.t / 3_600_000);
      if (h !== hour) {
        hour = h;
        hourBucket = bucketOf(ctx, res, m.t);
      }
      t = hourBucket;
    }
    const last = out[out.length - 1];
    if (!last || last.t !== t) {
      out.push({ ...m, t });
      continue;
    }
    last.high = Math.max(last.high, m.high);
    last.low = Math.min(last.low, m.low);
    last.close = m.close;
    last.upVolume += m.upVolume;
    last.downVolume += m.downVolume;
    last.upTicks += m.upTicks;
    last.downTicks += m.downTicks;
    last.bidVolume += m.bidVolume;
    last.offerVolume += m.offerVolume;
  }
  return out;
}

/** The history a request asks for, oldest first: recorded data, preceded by synthetic data where the tape is too short. */
export function history(ctx: ChartContext, tape: ContractTape, req: ChartRequest): { bars?: Bar[]; ticks?: Tick[] } {
  const within = (t: number) => t <= req.to && (req.from === undefined || t >= req.from);
  if (req.resolution.kind === 'ticks') {
    const recorded = tape.ticks.tail(tape.ticks.length).filter((k) => within(k.t));
    let ticks = recorded.slice(-req.count);
    if (ticks.length < req.count && (req.from === undefined || req.from < tape.startedAt)) {
      const older = syntheticTicks(ctx, tape, req.count - ticks.length).filter((k) => within(k.t)).slice(0, req.count - ticks.length).reverse();
      ticks = [...older, ...ticks];
    }
    return { ticks };
  }
  const res = req.resolution;
  let bars = recordedBars(ctx, tape, res).filter((b) => within(b.t)).slice(-req.count);
  if (bars.length < req.count && (req.from === undefined || req.from < tape.startedAt)) {
    const want = req.count - bars.length;
    const older = syntheticBars(ctx, tape, res, req.from === undefined ? want : MAX_ELEMENTS).filter((b) => within(b.t)).slice(0, want).reverse();
    bars = [...older, ...bars];
  }
  return { bars };
}

/** A bar as Tradovate sends it. */
export function wireBar(b: Bar): Record<string, unknown> {
  return {
    timestamp: new Date(b.t).toISOString(), open: b.open, high: b.high, low: b.low, close: b.close, upVolume: b.upVolume,
    downVolume: b.downVolume, upTicks: b.upTicks, downTicks: b.downTicks, bidVolume: b.bidVolume, offerVolume: b.offerVolume,
  };
}

/** A tick packet: prices in ticks relative to `bp`, times in ms relative to `bt`. */
export function tickPacket(id: number, source: 'db' | 'rt', td: number, tickSize: number, ticks: Tick[]): Record<string, unknown> {
  const first = ticks[0]!;
  const bp = Math.round(first.price / tickSize);
  const bt = first.t;
  const tks = ticks.map((k) => {
    const p = Math.round(k.price / tickSize) - bp;
    return { t: k.t - bt, p, s: k.size, b: p, a: p, bs: 10, as: 10, id: k.id };
  });
  return { id, s: source, td, bp, bt, ts: tickSize, tks };
}

/** History packets of a new chart: chunks of bars or ticks, then the end-of-history marker. */
export function historyPackets(id: number, td: number, tickSize: number, h: { bars?: Bar[]; ticks?: Tick[] }): Array<Record<string, unknown>> {
  const out: Array<Record<string, unknown>> = [];
  const list: Array<Bar | Tick> = h.bars ?? h.ticks ?? [];
  for (let i = 0; i < list.length; i += PACKET) {
    const chunk = list.slice(i, i + PACKET);
    out.push(h.bars ? { id, td, bars: (chunk as Bar[]).map(wireBar) } : tickPacket(id, 'db', td, tickSize, chunk as Tick[]));
  }
  out.push({ id, eoh: true });
  return out;
}

/** A live chart: its resolution and the bar being built now. */
export interface LiveChart {
  id: number;
  resolution: Resolution;
  current?: Bar;
}

/** The live packet for one new tick (`prev` = the price before it). */
export function liveUpdate(ctx: ChartContext, chart: LiveChart, tick: Tick, prev: number, td: number, tickSize: number): Record<string, unknown> {
  if (chart.resolution.kind === 'ticks') return tickPacket(chart.id, 'rt', td, tickSize, [tick]);
  const t = bucketOf(ctx, chart.resolution, tick.t);
  if (chart.current && chart.current.t === t) addToBar(chart.current, tick.price, tick.size, prev);
  else chart.current = newBar(t, tick.price, tick.size, prev);
  return { id: chart.id, td, bars: [wireBar(chart.current)] };
}
