/**
 * Runs the paper broker on a worker thread so `tradegate serve --paper` keeps it off the
 * front thread. The worker entry is `workers/paper-broker.ts` (compiled to dist/). The thread
 * stays watched after it is ready: if it dies without close(), `onCrash` listeners hear of it.
 */
import { Worker } from 'node:worker_threads';
import type { LevelWithSilent } from 'pino';
import { distPath } from '../paths.js';
import type { ThreadUsage } from '../thread-usage.js';
import type { SimHandle, SimOptions } from './index.js';

/** What crosses into the worker: SimOptions minus functions and objects, plus a log level. */
export type SimWorkerData = Omit<SimOptions, 'logger' | 'clock'> & { logLevel?: LevelWithSilent };

/** Messages the worker posts back. */
export type SimWorkerMessage =
  | { type: 'ready'; port: number; url: string; restUrl: string; wsUrl: string; controlUrl: string }
  | { type: 'error'; message: string }
  | { type: 'closed' }
  | { type: 'usage'; usage: ThreadUsage };

/** A paper broker running on a worker thread. */
export interface SimWorkerHandle extends SimHandle {
  /** The thread (tests end it to play a crash). */
  readonly worker: Worker;
  /**
   * Calls `listener` once if the thread ends without close() (a crash): the broker and its
   * state are gone. Registered after a crash, it is called at once.
   */
  onCrash(listener: (reason: string) => void): void;
  /** The broker thread's CPU and event-loop usage so far (undefined once it has ended). */
  usage(): Promise<ThreadUsage | undefined>;
}

/** Starts the paper broker in a worker thread; `close()` stops it and ends the thread. */
export function startSimInWorker(opts: SimOptions & { logLevel?: LevelWithSilent } = {}): Promise<SimWorkerHandle> {
  const { logger: _logger, clock: _clock, ...data } = opts;
  const worker = new Worker(distPath('workers/paper-broker.js'), { workerData: data satisfies SimWorkerData });
  return new Promise((resolve, reject) => {
    const onExit = (code: number) => reject(new Error(`paper broker worker exited with code ${code} before it was ready`));
    worker.once('error', reject);
    worker.once('exit', onExit);
    worker.once('message', (msg: SimWorkerMessage) => {
      worker.off('exit', onExit);
      worker.off('error', reject);
      if (msg.type !== 'ready') {
        void worker.terminate();
        reject(new Error(msg.type === 'error' ? msg.message : 'paper broker worker closed before it was ready'));
        return;
      }
      resolve(watch(worker, msg));
    });
  });
}

/** Keeps watching a ready worker: a crash is reported, a close waits for the thread to end. */
function watch(worker: Worker, ready: Extract<SimWorkerMessage, { type: 'ready' }>): SimWorkerHandle {
  const { type: _type, ...urls } = ready;
  const listeners: ((reason: string) => void)[] = [];
  let closing: Promise<void> | undefined;
  let crash: string | undefined;
  let exited = false;
  const ended = new Promise<void>((done) =>
    worker.once('exit', (code) => {
      exited = true;
      if (!closing) crashed(`paper broker worker exited (code ${code})`);
      done();
    }),
  );
  // An uncaught error ends the thread too ('exit' follows); it carries the better reason.
  worker.on('error', (err) => {
    if (!closing) crashed(`paper broker worker failed: ${err.message}`);
  });
  let usageWaiters: ((u: ThreadUsage | undefined) => void)[] = [];
  worker.on('message', (m: SimWorkerMessage) => {
    if (m.type === 'usage') for (const w of usageWaiters.splice(0)) w(m.usage);
  });
  void ended.then(() => {
    for (const w of usageWaiters.splice(0)) w(undefined);
    usageWaiters = [];
  });
  function crashed(reason: string): void {
    if (crash !== undefined) return;
    crash = reason;
    for (const l of listeners.splice(0)) l(reason);
  }
  return {
    ...urls,
    worker,
    onCrash(listener) {
      if (crash !== undefined) listener(crash);
      else listeners.push(listener);
    },
    usage() {
      if (exited) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        // One question answers every waiter: the thread posts its usage once per request.
        if (usageWaiters.push(resolve) === 1) worker.postMessage({ type: 'usage' });
      });
    },
    close() {
      closing ??= (async () => {
        if (exited) return;
        const timer = setTimeout(() => void worker.terminate(), 5000);
        worker.postMessage({ type: 'close' });
        await ended;
        clearTimeout(timer);
      })();
      return closing;
    },
  };
}
