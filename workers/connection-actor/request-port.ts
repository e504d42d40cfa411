/**
 * The worker side of the request plane (protocol.ts): requests arrive as arrays on
 * `requestPort`, each is handled, and the answers go back batched, one message per
 * event-loop turn, so a burst of orders costs the front one wake-up per turn, not one per
 * answer. A handler never throws: errors travel as ErrorData.
 */
import type { MessagePort } from 'node:worker_threads';
import { AppError, toErrorData } from '../../src/domain/problems.js';
import type { ActorRequest, ReplyEnvelope, RequestEnvelope, Result } from '../../src/actors/protocol.js';

/** Answers every request arriving on `port` with `handle`'s Result. */
export function serveRequests(port: MessagePort, handle: (connectionId: string, req: ActorRequest) => Promise<Result<unknown>>): void {
  let outbox: ReplyEnvelope[] = [];
  let scheduled = false;
  const flush = (): void => {
    scheduled = false;
    const batch = outbox;
    outbox = [];
    if (batch.length === 0) return;
    try {
      port.postMessage(batch);
    } catch {
      // An answer that cannot be cloned fails alone, as an error, never the worker and its actors.
      for (const env of batch) {
        try {
          port.postMessage([env]);
        } catch (err) {
          port.postMessage([{ id: env.id, result: { ok: false, error: toErrorData(new AppError('INTERNAL', `the actor's answer could not be passed back: ${err instanceof Error ? err.message : String(err)}`)) } }]);
        }
      }
    }
  };
  const reply = (id: number, result: Result<unknown>): void => {
    outbox.push({ id, result });
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  port.on('message', (batch: RequestEnvelope[]) => {
    const now = performance.now();
    for (const { id, connectionId, req, waitsMs } of batch) {
      if (req.type === 'place-order') req.callerGoneAt = now + waitsMs;
      handle(connectionId, req).then(
        (result) => reply(id, result),
        (err: unknown) => reply(id, { ok: false, error: toErrorData(err instanceof AppError ? err : new AppError('INTERNAL', `actor request failed: ${err instanceof Error ? err.message : String(err)}`)) }),
      );
    }
  });
}
