/** md/getChart without sockets: reading the request, history from the tape plus synthetic history, packets. */
import { describe, expect, it } from 'vitest';
import { history, historyPackets, liveUpdate, parseChartRequest, type ChartContext } from '../../../src/sim/charts.js';
import { ContractTape } from '../../../src/sim/market.js';

const NOW = Date.parse('2026-11-20T15:30:00Z');
const ctx: ChartContext = { seed: 1, sessions: 'none', stepMs: 250 };
const body = (underlyingType: string, timeRange: Record<string, unknown>, elementSize = 1) => ({ chartDescription: { underlyingType, elementSize, elementSizeUnit: 'UnderlyingUnits' }, timeRange });

describe('parseChartRequest', () => {
  it('reads bar and tick charts and the time range fields (both spellings of asFarAsTimestamp)', () => {
    expect(parseChartRequest(body('MinuteBar', { asMuchAsElements: 20 }, 15), NOW)).toEqual({ resolution: { kind: 'minutes', size: 15 }, count: 20, from: undefined, to: NOW });
    expect(parseChartRequest(body('DailyBar', { asFarAsTimeStamp: '2026-11-01T00:00:00Z' }), NOW)).toMatchObject({ resolution: { kind: 'daily' }, from: Date.parse('2026-11-01T00:00:00Z'), count: 5000 });
    expect(parseChartRequest(body('Tick', { closestTimestamp: '2026-11-20T15:00Z', asMuchAsElements: 99_999 }), NOW)).toMatchObject({ resolution: { kind: 'ticks' }, to: Date.parse('2026-11-20T15:00Z'), count: 5000 });
  });

  it('names what it refuses', () => {
    expect(parseChartRequest(body('Custom', { asMuchAsElements: 1 }), NOW)).toMatch(/underlyingType Custom/);
    expect(parseChartRequest(body('Tick', { asMuchAsElements: 1 }, 5), NOW)).toMatch(/elementSize 1/);
    expect(parseChartRequest(body('MinuteBar', {}), NOW)).toMatch(/timeRange needs one of/);
    expect(parseChartRequest(body('MinuteBar', { asMuchAsElements: 0 }), NOW)).toMatch(/asMuchAsElements/);
    expect(parseChartRequest(body('MinuteBar', { closestTimestamp: 'yesterday' }), NOW)).toMatch(/closestTimestamp/);
    expect(parseChartRequest({ chartDescription: { underlyingType: 'MinuteBar', elementSizeUnit: 'Renko' }, timeRange: { asMuchAsElements: 1 } }, NOW)).toMatch(/Renko/);
    expect(parseChartRequest({}, NOW)).toMatch(/chartDescription/);
  });
});

describe('history', () => {
  it('joins synthetic bars to the recorded ones, newest last, and honours closestTimestamp', () => {
    const tape = new ContractTape(7, 0.25, 5000, Date.parse('2026-11-20T15:20:05Z'));
    tape.record(5001, 1, Date.parse('2026-11-20T15:20:10Z'), 20261120);
    tape.record(5002, 1, Date.parse('2026-11-20T15:25:10Z'), 20261120);
    const req = parseChartRequest(body('MinuteBar', { asMuchAsElements: 10 }, 5), NOW);
    if (typeof req === 'string') throw new Error(req);
    const bars = history(ctx, tape, req).bars!;
    expect(bars.map((b) => new Date(b.t).toISOString().slice(11, 16))).toEqual(['14:35', '14:40', '14:45', '14:50', '14:55', '15:00', '15:05', '15:10', '15:15', '15:20', '15:25'].slice(-10));
    expect(bars[7]!.close).toBe(5000); // the last synthetic bar ends where the tape starts
    expect(bars[8]).toMatchObject({ open: 5001, close: 5001 });
    const earlier = parseChartRequest(body('MinuteBar', { asMuchAsElements: 3, closestTimestamp: '2026-11-20T15:12:00Z' }, 5), NOW);
    if (typeof earlier === 'string') throw new Error(earlier);
    expect(history(ctx, tape, earlier).bars!.map((b) => new Date(b.t).toISOString().slice(11, 16))).toEqual(['15:00', '15:05', '15:10']);
  });

  it('builds daily bars per trade date and skips weekends in synthetic history', () => {
    const tape = new ContractTape(7, 0.25, 5000, NOW);
    const req = parseChartRequest(body('DailyBar', { asMuchAsElements: 6 }), NOW);
    if (typeof req === 'string') throw new Error(req);
    const days = history(ctx, tape, req).bars!.map((b) => new Date(b.t).toISOString().slice(0, 10));
    expect(days).toEqual(['2026-11-12', '2026-11-13', '2026-11-16', '2026-11-17', '2026-11-18', '2026-11-19']);
  });

  it('packs ticks relative to a base price and time; live packets extend the current bar', () => {
    const tape = new ContractTape(7, 0.25, 5000, NOW);
    const t1 = tape.record(5000.25, 2, NOW + 100, 20261120);
    const t2 = tape.record(5000.5, 3, NOW + 300, 20261120);
    const packets = historyPackets(4, 20261120, 0.25, { ticks: [t1, t2] });
    expect(packets).toEqual([
      { id: 4, s: 'db', td: 20261120, bp: 20001, bt: NOW + 100, ts: 0.25, tks: [{ t: 0, p: 0, s: 2, b: 0, a: 0, bs: 10, as: 10, id: t1.id }, { t: 200, p: 1, s: 3, b: 1, a: 1, bs: 10, as: 10, id: t2.id }] },
      { id: 4, eoh: true },
    ]);
    const chart = { id: 5, resolution: { kind: 'minutes' as const, size: 1 } };
    expect(liveUpdate(ctx, chart, t1, 5000, 20261120, 0.25)).toMatchObject({ id: 5, bars: [{ open: 5000.25, close: 5000.25 }] });
    expect(liveUpdate(ctx, chart, t2, 5000.25, 20261120, 0.25)).toMatchObject({ bars: [{ open: 5000.25, high: 5000.5, close: 5000.5, upVolume: 5 }] });
  });
});
