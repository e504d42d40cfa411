/**
 * The cluster journal's appends while NATS cannot take them: tried again under one message id
 * (JetStream stores a retried publish once), given up only after a minute or when the store closes.
 */
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createNatsJournal } from '../../../../src/store/nats/journal.js';

afterEach(() => vi.useRealTimers());

function journalWith(publish: (subject: string, data: string, opts: { msgID: string }) => Promise<unknown>) {
  const writes: Promise<unknown>[] = [];
  const failed: unknown[] = [];
  const journal = createNatsJournal({ publish } as unknown as JetStreamClient, {} as JetStreamManager, {
    stream: 's',
    subjectPrefix: 'p.journal',
    clock: () => 1_000,
    track: (write) => writes.push(write.catch((err: unknown) => failed.push(err))),
  });
  const entry = { userId: 'usr_a', accountId: '1', kind: 'webhook-alert', request: { i: 1 }, outcome: null };
  return { journal, writes, failed, entry };
}

describe('cluster journal appends', () => {
  it('are tried again while NATS is away, each try under the same message id, so an entry is neither lost nor stored twice (cluster probe: an alert that traded had no entry after a NATS restart)', async () => {
    vi.useFakeTimers();
    const tries: string[] = [];
    const { journal, writes, failed, entry } = journalWith(async (_subject, _data, { msgID }) => {
      tries.push(msgID);
      if (tries.length < 4) throw new Error('TIMEOUT');
      return { seq: 1 };
    });
    journal.append(entry);
    journal.append({ ...entry, request: { i: 2 } });
    await vi.advanceTimersByTimeAsync(5_000);
    await Promise.all(writes);
    expect(failed).toEqual([]);
    // Five tries in all (three refused), each entry under its own id throughout.
    expect(tries.length).toBe(5);
    expect(new Set(tries).size).toBe(2);
  });

  it('give up after a minute, and at once once the store closes', async () => {
    vi.useFakeTimers();
    const { journal, writes, failed, entry } = journalWith(async () => {
      throw new Error('TIMEOUT');
    });
    journal.append(entry);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(failed).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(35_000);
    await Promise.all(writes);
    expect(failed).toHaveLength(1);
    journal.append(entry);
    journal.stopRetries();
    await vi.advanceTimersByTimeAsync(300);
    await Promise.all(writes);
    expect(failed).toHaveLength(2);
  });
});
