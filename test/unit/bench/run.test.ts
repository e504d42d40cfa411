import { describe, expect, it } from 'vitest';
import { fileLimit, parseScenario, RUN_ORDER } from '../../../bench/run.js';
import { SCENARIOS } from '../../../bench/summary.js';

describe('bench command arguments', () => {
  it('runs every scenario by default and exactly the one named otherwise', () => {
    expect(parseScenario(undefined)).toEqual(SCENARIOS);
    expect(parseScenario('all')).toEqual(SCENARIOS);
    expect(parseScenario('sse')).toEqual(['sse']);
    expect(() => parseScenario('latency')).toThrow(/unknown scenario 'latency'/);
  });

  it('orders a full run so that every scenario appears once', () => {
    expect([...RUN_ORDER].sort()).toEqual([...SCENARIOS].sort());
  });

  it('reads the open-file limit as a positive number', () => {
    expect(fileLimit()).toBeGreaterThan(0);
  });
});
