/**
 * Work in flight on an actor, kept where later requests can wait for it: a promise stays in its
 * map (under its key) until it settles, and a waiter gives up after a bound of its own.
 */

/** Keeps `run` under `key` in `map` until it settles (unless a later one took the key); returns it. */
export function tracked<T>(map: Map<string, Promise<unknown>>, key: string, run: Promise<T>): Promise<T> {
  const done = run.catch(() => undefined);
  map.set(key, done);
  void done.then(() => {
    if (map.get(key) === done) map.delete(key);
  });
  return run;
}

export { settledWithin } from '../../src/wait.js';
