/**
 * An ActorGateway the test drives: it records every request and added connection, answers
 * requests from a script (`responder`, else BROKER_UNAVAILABLE), and emits events as actors
 * would (remembering statuses and accounts, as the supervisor does).
 */
import type { ActorEvent, ActorGateway, ActorRequest, ResultMap } from '../../src/actors/protocol.js';
import type { ConnectionSpec, StatusEvent } from '../../src/domain/connections.js';
import type { AccountRecord } from '../../src/domain/orders.js';
import { AppError } from '../../src/domain/problems.js';

type Responder = { [K in keyof ResultMap]?: (req: Extract<ActorRequest, { type: K }> | any) => ResultMap[K] | Promise<ResultMap[K]> };

/** A scripted gateway. */
export class FakeGateway implements ActorGateway {
  readonly calls: { connectionId: string; req: ActorRequest; timeoutMs?: number }[] = [];
  /** Set by a test to hold working-orders pages on the front. */
  keptPage?: ActorGateway['keptPage'];
  readonly added: ConnectionSpec[] = [];
  readonly removed: string[] = [];
  readonly accountsOf = new Map<string, AccountRecord[]>();
  readonly statusOf = new Map<string, StatusEvent>();
  responder: Responder = {};
  private readonly listeners = new Set<(e: ActorEvent) => void>();

  async addConnection(spec: ConnectionSpec): Promise<void> {
    this.added.push(spec);
  }
  async removeConnection(connectionId: string): Promise<void> {
    this.removed.push(connectionId);
  }
  async request<R extends ActorRequest>(connectionId: string, req: R, opts?: { timeoutMs?: number }): Promise<ResultMap[R['type']]> {
    this.calls.push({ connectionId, req, ...(opts?.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}) });
    const fn = this.responder[req.type] as ((r: R) => ResultMap[R['type']]) | undefined;
    if (!fn) throw new AppError('BROKER_UNAVAILABLE', `no scripted answer for ${req.type}`);
    return fn(req);
  }
  status(connectionId: string): StatusEvent | undefined {
    return this.statusOf.get(connectionId);
  }
  accounts(connectionId: string): AccountRecord[] {
    return this.accountsOf.get(connectionId) ?? [];
  }
  onEvent(listener: (e: ActorEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  async close(): Promise<void> {}

  /** Emits an event as an actor would. */
  emit(event: ActorEvent): void {
    if (event.type === 'status') this.statusOf.set(event.connectionId, event);
    if (event.type === 'accounts') this.accountsOf.set(event.connectionId, event.accounts);
    for (const l of [...this.listeners]) l(event);
  }
}
