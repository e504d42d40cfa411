/**
 * Market data of the paper broker over the socket: charts (history from the recorded price
 * walk, synthetic before it, then live bars or ticks under the chart id until md/cancelChart),
 * the DOM and the volume-at-price histogram. Requests are framed as the tutorials frame them.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startSim, type SimHandle } from '../../../src/sim/index.js';
import { ctl, RawClient, userWithToken, type Msg } from '../../support/sim.js';

let sim: SimHandle;
let c: RawClient;
let now = Date.parse('2026-11-20T15:00:30Z');

beforeEach(async () => {
  now = Date.parse('2026-11-20T15:00:30Z');
  sim = await startSim({ priceStepMs: 0, seed: 9, clock: () => now });
  await ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price: 5000 });
  const { token } = await userWithToken(sim, 'ann');
  c = await RawClient.authorized(sim.wsUrl, token);
});
afterEach(async () => {
  c.close();
  await sim.close();
});

const setPrice = (price: number) => ctl(sim, 'POST', '/prices', { symbol: 'ESZ6', price });
const chartBody = (underlyingType: string, asMuchAsElements: number, elementSize = 1) => ({
  symbol: 'ESZ6', chartDescription: { underlyingType, elementSize, elementSizeUnit: 'UnderlyingUnits', withHistogram: false }, timeRange: { asMuchAsElements },
});
const chartsOf = (id: number) => c.messages.filter((m) => m.e === 'chart').flatMap((m) => m.d.charts).filter((k: Msg) => k.id === id);

describe('md/getChart', () => {
  it('sends minute bars: synthetic history, then recorded bars, eoh, then live updates until cancelChart', async () => {
    // Trade a little so the tape has recorded minutes: 15:00 and 15:01.
    await setPrice(5001);
    await setPrice(4999.5);
    now += 60_000;
    await setPrice(5002.25);
    const answer = await c.request('md/getChart', '', chartBody('MinuteBar', 30));
    expect(answer.s).toBe(200);
    const id = answer.d.realtimeId;
    expect(answer.d).toMatchObject({ historicalId: id, subscriptionId: id });
    expect(c.frames.find((f) => f.includes(`"i":${answer.i}`))).not.toContain('"e":"chart"');

    await c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.eoh));
    const bars = chartsOf(id).flatMap((k: Msg) => k.bars ?? []);
    expect(bars).toHaveLength(30);
    const times = bars.map((b: Msg) => Date.parse(b.timestamp));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    expect(new Set(times).size).toBe(30);
    // The two recorded minutes close the history: 15:00 (5000 → 5001 → 4999.5) and 15:01.
    expect(bars[28]).toMatchObject({ timestamp: '2026-11-20T15:00:00.000Z', open: 5001, high: 5001, low: 4999.5, close: 4999.5 });
    expect(bars[29]).toMatchObject({ timestamp: '2026-11-20T15:01:00.000Z', close: 5002.25 });
    // Synthetic bars join the tape: each closes where the next one opens, the last where the tape starts.
    for (let i = 0; i < 27; i++) expect(bars[i].close).toBe(bars[i + 1].open);
    expect(bars[27].close).toBe(5000);
    for (const b of bars) expect(b.high).toBeGreaterThanOrEqual(Math.max(b.open, b.close));

    const live = c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.id === id && k.bars?.[0]?.close === 5003));
    await setPrice(5003);
    expect((await live).d.charts[0].bars[0]).toMatchObject({ timestamp: '2026-11-20T15:01:00.000Z', high: 5003, close: 5003 });
    now += 60_000;
    const next = c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.id === id));
    await setPrice(5002);
    expect((await next).d.charts[0].bars[0]).toMatchObject({ timestamp: '2026-11-20T15:02:00.000Z', open: 5002 });

    expect(await c.request('md/cancelChart', '', { subscriptionId: id })).toMatchObject({ s: 200 });
    const before = chartsOf(id).length;
    await setPrice(5004);
    await c.request('account/list', '', undefined); // one more round trip: any update would have arrived by now
    expect(chartsOf(id)).toHaveLength(before);
    expect((await c.request('md/cancelChart', '', { subscriptionId: id })).s).toBe(404);
  });

  it('gives the same synthetic history to a second request (seeded per contract and bar size)', async () => {
    const first = await c.request('md/getChart', '', chartBody('MinuteBar', 50, 5));
    const second = await c.request('md/getChart', '', chartBody('MinuteBar', 50, 5));
    await c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.id === second.d.realtimeId && k.eoh));
    const bars = (id: number) => chartsOf(id).flatMap((k: Msg) => k.bars ?? []);
    expect(bars(first.d.realtimeId)).toHaveLength(50);
    expect(bars(second.d.realtimeId)).toEqual(bars(first.d.realtimeId));
    expect(Date.parse(bars(first.d.realtimeId)[1].timestamp) - Date.parse(bars(first.d.realtimeId)[0].timestamp)).toBe(5 * 60_000);
  });

  it('sends tick charts in the compact form (bp, bt, ts, tks), then live ticks', async () => {
    await setPrice(5000.25);
    await setPrice(5000.5);
    const answer = await c.request('md/getChart', '', chartBody('Tick', 10));
    const id = answer.d.realtimeId;
    await c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.id === id && k.eoh));
    const packets = chartsOf(id).filter((k: Msg) => k.tks);
    const ticks = packets.flatMap((p: Msg) => p.tks.map((t: Msg) => ({ price: (p.bp + t.p) * p.ts, time: p.bt + t.t, id: t.id })));
    expect(ticks).toHaveLength(10);
    expect(packets[0]).toMatchObject({ s: 'db', ts: 0.25, td: 20261120 });
    expect(ticks.slice(-2).map((t) => t.price)).toEqual([5000.25, 5000.5]);
    expect(ticks.map((t) => t.id)).toEqual([...ticks.map((t) => t.id)].sort((a, b) => a - b));
    const live = c.next((m) => m.e === 'chart' && m.d.charts.some((k: Msg) => k.id === id && k.s === 'rt'));
    await setPrice(4999.75);
    const p = (await live).d.charts[0];
    expect((p.bp + p.tks[0].p) * p.ts).toBe(4999.75);
  });

  it('refuses chart kinds it cannot build, and requests without a time range, with 400', async () => {
    const bad = (body: Msg) => c.request('md/getChart', '', body).then((r) => r.s);
    expect(await bad({ ...chartBody('MinuteBar', 10), chartDescription: { underlyingType: 'MinuteBar', elementSize: 10, elementSizeUnit: 'Volume' } })).toBe(400);
    expect(await bad(chartBody('DOM', 10))).toBe(400);
    expect(await bad({ ...chartBody('MinuteBar', 10), timeRange: {} })).toBe(400);
    expect(await bad({ ...chartBody('MinuteBar', 10), symbol: 'XXZ6' })).toBe(400);
  });
});

describe('md/subscribeDOM and md/subscribeHistogram', () => {
  it('sends a ten-level book around the last price after the answer, and again on each change', async () => {
    const answer = await c.request('md/subscribeDOM', '', { symbol: 'ESZ6' });
    expect(answer.d).toMatchObject({ mode: 'RealTime', subscriptionId: expect.any(Number) });
    const dom = (await c.next((m) => m.e === 'md' && m.d.doms)).d.doms[0];
    expect(dom.contractId).toBe(answer.d.subscriptionId);
    expect(dom.bids).toHaveLength(10);
    expect(dom.bids[0].price).toBe(5000);
    expect(dom.bids[1].price).toBe(4999.75);
    expect(dom.offers[9].price).toBe(5002.25);
    const moved = c.next((m) => m.e === 'md' && m.d.doms);
    await setPrice(5001);
    expect((await moved).d.doms[0].bids[0].price).toBe(5001);
  });

  it('sends the trade date’s volume at price: all levels first, then the level each trade changed', async () => {
    await setPrice(5000.25);
    await setPrice(5000.5);
    await c.request('md/subscribeHistogram', '', { symbol: 'ESZ6' });
    const full = (await c.next((m) => m.e === 'md' && m.d.histograms)).d.histograms[0];
    expect(full).toMatchObject({ refresh: true, base: 5000.25, tradeDate: { year: 2026, month: 11, day: 20 } });
    expect(Object.keys(full.items).sort()).toEqual(['0', '1']);
    const update = c.next((m) => m.e === 'md' && m.d.histograms);
    await setPrice(5000.25);
    const h = (await update).d.histograms[0];
    expect(h.refresh).toBe(false);
    expect(Object.keys(h.items)).toEqual(['0']);
    expect(h.items['0']).toBeGreaterThan(full.items['0']);
  });
});
