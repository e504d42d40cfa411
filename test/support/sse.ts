/**
 * The health stream from a client's side: opens `GET /api/v1/connection-health/stream` and
 * parses its messages as they arrive.
 */

/** One parsed SSE message; `id` is its SSE id (the `id:` line). */
export type HealthEvent = { type: string; connectionId?: string; status?: string; reason?: string; detail?: string; orderId?: string; ts: number; id?: number };

/** Opens the stream as `openHealthStream` does, returning the HTTP status instead of throwing on a refusal. */
export async function streamStatus(url: string, apiKey: string): Promise<number> {
  const res = await fetch(`${url}/api/v1/connection-health/stream`, { headers: { 'x-api-key': apiKey, accept: 'text/event-stream' } });
  await res.body?.cancel();
  return res.status;
}

/** An open SSE health stream that collects events as they arrive. */
export interface HealthStream {
  events: HealthEvent[];
  /** Resolves with the first event at index ≥ `from` that matches, or throws after `ms`. */
  waitFor(match: (e: HealthEvent) => boolean, from: number, ms: number): Promise<{ event: HealthEvent; index: number }>;
  close(): void;
  /** Resolves when the server ends the stream (not when close() aborts it). */
  ended: Promise<void>;
}

/** Opens `GET /api/v1/connection-health/stream` (resuming after `lastEventId` when given) and parses its messages in the background. */
export async function openHealthStream(url: string, apiKey: string, opts: { lastEventId?: number } = {}): Promise<HealthStream> {
  const abort = new AbortController();
  const res = await fetch(`${url}/api/v1/connection-health/stream`, {
    headers: { 'x-api-key': apiKey, accept: 'text/event-stream', ...(opts.lastEventId !== undefined && { 'last-event-id': String(opts.lastEventId) }) },
    signal: abort.signal,
  });
  if (res.status !== 200) throw new Error(`health stream: ${res.status} ${await res.text()}`);
  const events: HealthEvent[] = [];
  const waiters = new Set<() => void>();
  let serverEnded!: () => void;
  const ended = new Promise<void>((resolve) => (serverEnded = resolve));
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const lines = buffer.slice(0, cut).split('\n');
          const data = lines
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          const id = lines.find((l) => l.startsWith('id:'));
          buffer = buffer.slice(cut + 2);
          if (data) events.push({ ...(JSON.parse(data) as HealthEvent), ...(id && { id: Number(id.slice(3).trim()) }) });
        }
        for (const w of waiters) w();
      }
      serverEnded();
    } catch {
      // aborted by close()
    }
  })();
  return {
    events,
    waitFor(match, from, ms) {
      return new Promise((resolve, reject) => {
        const check = () => {
          for (let i = from; i < events.length; i++) {
            if (match(events[i]!)) {
              cleanup();
              resolve({ event: events[i]!, index: i });
              return;
            }
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`no matching health event within ${ms} ms; got ${JSON.stringify(events.slice(from))}`));
        }, ms);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    close: () => abort.abort(),
    ended,
  };
}
