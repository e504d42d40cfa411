/** Loading data from the API into a component, with reloads and polling. */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ApiError } from './api';

export interface Resource<T> {
  data: T | undefined;
  error: ApiError | undefined;
  /** True until the first answer (data or error); reloads keep showing the old data. */
  loading: boolean;
  reload(): Promise<void>;
  /** When the data was last loaded. */
  loadedAt: number | null;
}

export function asApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : new ApiError(0, 'CLIENT', err instanceof Error ? err.message : String(err));
}

/** Longest Retry-After of a 503 that a resource waits out by itself (a connection starting says 1 s; a disabled one 60 s). */
const SOON_S = 5;
/** How many such reads in a row, until one succeeds (a start takes a few seconds). */
const SOON_TRIES = 10;

/** Loads `load()` now and whenever `deps` change; again after a short 503's Retry-After. */
export function useResource<T>(load: () => Promise<T>, deps: unknown[]): Resource<T> {
  const [state, setState] = useState<{ data?: T; error?: ApiError; loading: boolean; loadedAt: number | null }>({ loading: true, loadedAt: null });
  const generation = useRef(0);
  const soonRetries = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;

  const reload = useCallback(async () => {
    const mine = ++generation.current;
    try {
      const data = await loadRef.current();
      if (mine === generation.current) setState({ data, loading: false, loadedAt: Date.now() });
      soonRetries.current = 0;
    } catch (err) {
      if (mine !== generation.current) return;
      const error = asApiError(err);
      setState((s) => ({ ...s, error, loading: false }));
      // A broker connection still starting (503 with a short Retry-After): read again then, not at the next
      // poll; a few times in a row only, so that an outage is not read every second (the session's rate limit).
      if (error.status === 503 && error.retryAfter !== null && error.retryAfter <= SOON_S && soonRetries.current < SOON_TRIES) {
        soonRetries.current++;
        setTimeout(() => {
          if (mine === generation.current) void reload();
        }, error.retryAfter * 1000);
      }
    }
  }, []);

  useEffect(() => {
    setState({ loading: true, loadedAt: null });
    void reload();
    return () => {
      generation.current++;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps);

  return { data: state.data, error: state.error, loading: state.loading, reload, loadedAt: state.loadedAt };
}

/** Calls `tick` every `ms` while the tab is visible (and once when it becomes visible again). */
export function usePolling(tick: () => unknown, ms: number, enabled = true): void {
  const tickRef = useRef(tick);
  tickRef.current = tick;
  useEffect(() => {
    if (!enabled) return;
    const run = () => {
      if (document.visibilityState === 'visible') void tickRef.current();
    };
    const timer = setInterval(run, ms);
    document.addEventListener('visibilitychange', run);
    return () => {
      clearInterval(timer);
      document.removeEventListener('visibilitychange', run);
    };
  }, [ms, enabled]);
}

/** Runs an action, tracking busy and the API error it ended with. */
export function useAction(): { busy: boolean; error: ApiError | undefined; run<T>(fn: () => Promise<T>): Promise<T | undefined>; clear(): void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | undefined>(undefined);
  const run = useCallback(async <T,>(fn: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await fn();
    } catch (err) {
      setError(asApiError(err));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, clear: () => setError(undefined) };
}

/** Re-renders every `ms` (for "3 min ago" labels). */
export function useNow(ms = 10_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}
