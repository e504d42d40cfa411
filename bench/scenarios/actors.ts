/**
 * `actors`: what one connection actor costs — RSS growth and start time for 1, 10 and 100
 * connections to the paper broker. The measurement itself is `bench/actors.ts` (owned by
 * the actors work: it knows how to host actors); this scenario runs it and reports.
 */
import { measureActors, workerStartMs, type ActorMeasurement } from '../actors.js';
import { check } from '../report.js';
import { r2, type ScenarioContext, type ScenarioRun } from '../scenario.js';
import type { ActorsSummary } from '../summary.js';

/** Turns raw measurements into the summary section and its checks. */
export function summarizeActors(
  measurements: Pick<ActorMeasurement, 'connections' | 'rssDeltaMB' | 'startMs' | 'connected'>[],
  bareWorkerStartMs: number,
): { summary: ActorsSummary; checks: ReturnType<typeof check>[] } {
  const runs = measurements.map((m) => ({
    connections: m.connections,
    rssDeltaMB: r2(m.rssDeltaMB),
    rssPerActorMB: r2(m.rssDeltaMB / m.connections),
    startMs: r2(m.startMs),
    startPerActorMs: r2(m.startMs / m.connections),
  }));
  // The largest run amortises fixed costs best: its RSS per actor is the figure reported;
  // the start time is the single-connection run's (spawn to CONNECTED, one actor alone).
  const largest = runs.reduce<(typeof runs)[number] | undefined>((a, b) => (!a || b.connections > a.connections ? b : a), undefined);
  const single = runs.find((r) => r.connections === 1) ?? runs[0];
  const checks = measurements.map((m) =>
    check(`${m.connections} actor(s) reach CONNECTED`, m.connected === m.connections, `${m.connected} of ${m.connections} reached CONNECTED`),
  );
  return {
    summary: { rssPerActorMB: largest?.rssPerActorMB ?? 0, startMs: single?.startMs ?? 0, workerStartMs: r2(bareWorkerStartMs), runs },
    checks,
  };
}

/** Runs bench/actors.ts's measurement (in this process: a paper broker and a supervisor). */
export async function runActors(ctx: ScenarioContext): Promise<ScenarioRun<ActorsSummary>> {
  const counts = ctx.quick ? [1, 4] : [1, 10, 100];
  ctx.log(`actors: measuring ${counts.join(', ')} connections`);
  const bare = await workerStartMs(ctx.quick ? 3 : 5);
  const { summary, checks } = summarizeActors(await measureActors({ counts }), bare);
  return { summary, checks, notes: ['RSS is the bench process\'s growth while it hosts the actors (worker threads) and an in-process paper broker.'], series: [] };
}
