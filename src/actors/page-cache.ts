/**
 * Working-order pages as the actors served them, kept on the front thread so that reading an
 * unchanged list again never crosses into the actor's thread (a 150-order page is ~60 KB of
 * JSON: the round trip, its copies and the actor's turn were most of such a read).
 *
 * Validity, without trusting any ordering between the two ports of a worker:
 * - every page carries the version the actor served it at, and the actor tells the front the
 *   new version (WorkingOrdersChanged) when its working orders change after a page went out; a
 *   page older than the newest version heard of is dropped, or never kept when its answer
 *   arrives after the notice. Versions only grow within a worker thread (order-model.ts);
 * - anything that changes what a read may answer besides the orders themselves (a status
 *   event: never serve a connection that is not CONNECTED; an accounts event: an account that
 *   went inactive; the actor added, removed or its worker restarted) forgets the connection's
 *   pages, and an answer to a request sent before that is not kept (`ticket`).
 * The supervisor serves a page from here only while the connection's last status is CONNECTED.
 */
import type { WorkingOrdersPage } from './protocol.js';

/** Pages kept per connection at most (a client walking many cursors must not grow it without bound). */
export const MAX_PAGES_PER_CONNECTION = 8;

interface ConnectionPages {
  /** Changes whenever the connection's pages are forgotten; tickets carry it. */
  epoch: number;
  /** Newest page version the actor reported as changed. */
  latest: number;
  pages: Map<string, WorkingOrdersPage>;
}

/** See the module comment. */
export class WorkingOrdersCache {
  private readonly byConnection = new Map<string, ConnectionPages>();
  private epochs = 0;

  /** The kept page for this read, if still valid. */
  get(connectionId: string, accountId: string, offset: number, limit: number): WorkingOrdersPage | undefined {
    return this.byConnection.get(connectionId)?.pages.get(pageKey(accountId, offset, limit));
  }

  /** Taken when a page request is sent; `keep` accepts the answer only under the same ticket. */
  ticket(connectionId: string): number {
    let c = this.byConnection.get(connectionId);
    if (!c) this.byConnection.set(connectionId, (c = { epoch: ++this.epochs, latest: 0, pages: new Map() }));
    return c.epoch;
  }

  /** Keeps an answer unless the connection was reset since its ticket or a newer version was announced. */
  keep(connectionId: string, ticket: number, accountId: string, offset: number, limit: number, page: WorkingOrdersPage): void {
    const c = this.byConnection.get(connectionId);
    if (!c || c.epoch !== ticket || page.version === undefined || page.version < c.latest) return;
    if (c.pages.size >= MAX_PAGES_PER_CONNECTION) c.pages.clear();
    c.pages.set(pageKey(accountId, offset, limit), page);
  }

  /** The actor's working orders changed at `version`: every page served before it is stale. */
  changed(connectionId: string, version: number): void {
    const c = this.byConnection.get(connectionId);
    if (!c || version <= c.latest) return;
    c.latest = version;
    for (const [key, page] of c.pages) if ((page.version ?? 0) < version) c.pages.delete(key);
  }

  /** Forgets the connection's pages (status or accounts changed, actor added, removed or restarted). */
  reset(connectionId: string): void {
    this.byConnection.delete(connectionId);
  }
}

function pageKey(accountId: string, offset: number, limit: number): string {
  return `${accountId}|${offset}|${limit}`;
}
