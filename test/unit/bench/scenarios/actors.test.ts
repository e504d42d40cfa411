import { describe, expect, it } from 'vitest';
import { summarizeActors } from '../../../../bench/scenarios/actors.js';

describe('actors summary', () => {
  it('reports RSS per actor from the largest run and start time from the single-actor run', () => {
    const { summary, checks } = summarizeActors(
      [
        { connections: 1, rssDeltaMB: 20, startMs: 900, connected: 1 },
        { connections: 10, rssDeltaMB: 150, startMs: 9000, connected: 10 },
        { connections: 100, rssDeltaMB: 1400, startMs: 80_000, connected: 99 },
      ],
      700,
    );
    expect(summary.rssPerActorMB).toBe(14);
    expect(summary.startMs).toBe(900);
    expect(summary.workerStartMs).toBe(700);
    expect(summary.runs[1]).toEqual({ connections: 10, rssDeltaMB: 150, rssPerActorMB: 15, startMs: 9000, startPerActorMs: 900 });
    expect(checks.map((c) => c.ok)).toEqual([true, true, false]);
  });
});
