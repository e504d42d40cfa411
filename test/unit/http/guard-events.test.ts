import { describe, expect, it } from 'vitest';
import type { ActorEvent, GuardEvent } from '../../../src/actors/protocol.js';
import type { LockState } from '../../../src/domain/guards.js';
import { recordGuardEvents } from '../../../src/http/guard-events.js';
import { createLogger } from '../../../src/log.js';

function bridge(setLock: (userId: string, accountId: string, lock: LockState | null) => Promise<unknown>) {
  const listeners = new Set<(e: ActorEvent) => void>();
  const journal: unknown[] = [];
  const store = {
    connections: { byId: (id: string) => (id === 'c1' ? { userId: 'alice' } : undefined) },
    guards: { setLock },
    journal: { append: (e: unknown) => journal.push(e) },
  };
  const stop = recordGuardEvents({ onEvent: (l) => (listeners.add(l), () => listeners.delete(l)) }, store, createLogger('silent'));
  const emit = (e: Partial<GuardEvent>) => {
    const event: GuardEvent = { type: 'guard', connectionId: 'c1', accountId: '7', guard: 'kill_switch', action: 'refused', ts: 1, detail: 'd', ...e };
    for (const l of listeners) l(event);
  };
  return { emit, journal, stop, listeners };
}

const lock: LockState = { guard: 'kill_switch', since: 1, until: null, detail: 'away' };

describe('recordGuardEvents', () => {
  it('journals every guard event of an owned connection; stores locks and unlocks', async () => {
    const stored: [string, string, LockState | null][] = [];
    const b = bridge(async (u, a, l) => stored.push([u, a, l]));
    b.emit({ action: 'refused', guard: 'max_position', detail: 'the position could reach 4 contracts (max 3)' });
    b.emit({ action: 'locked', lock });
    b.emit({ action: 'unlocked', lock: null });
    b.emit({ connectionId: 'ghost', action: 'locked', lock });
    await new Promise((r) => setTimeout(r, 10));
    expect(b.journal).toEqual([
      { userId: 'alice', accountId: '7', kind: 'guard', request: { guard: 'max_position', action: 'refused' }, outcome: { detail: 'the position could reach 4 contracts (max 3)' } },
      { userId: 'alice', accountId: '7', kind: 'guard', request: { guard: 'kill_switch', action: 'locked' }, outcome: { detail: 'd', lock } },
      { userId: 'alice', accountId: '7', kind: 'guard', request: { guard: 'kill_switch', action: 'unlocked' }, outcome: { detail: 'd', lock: null } },
    ]);
    expect(stored).toEqual([['alice', '7', lock], ['alice', '7', null]]);
  });

  it('keeps lock writes of one account in event order, even when a write is slow or fails', async () => {
    const stored: (LockState | null)[] = [];
    let first = true;
    const b = bridge(async (_u, _a, l) => {
      if (first) {
        first = false;
        await new Promise((r) => setTimeout(r, 30));
        throw new Error('disk hiccup');
      }
      stored.push(l);
    });
    b.emit({ action: 'locked', lock });
    b.emit({ action: 'unlocked', lock: null });
    b.emit({ action: 'locked', lock: { ...lock, detail: 'again' } });
    await new Promise((r) => setTimeout(r, 80));
    expect(stored).toEqual([null, { ...lock, detail: 'again' }]);
    b.stop();
    expect(b.listeners.size).toBe(0);
  });
});
