/**
 * Worker-thread entry of the paper broker: starts it with `workerData`, posts its URLs back,
 * and closes it (then lets the thread end) on `{type:'close'}`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { createLogger } from '../src/log.js';
import { startSim } from '../src/sim/index.js';
import { threadUsage } from '../src/thread-usage.js';
import type { SimWorkerData, SimWorkerMessage } from '../src/sim/worker.js';

const port = parentPort;
if (!port) throw new Error('workers/paper-broker.js must run as a worker thread');
const { logLevel, ...opts } = (workerData ?? {}) as SimWorkerData;
const post = (m: SimWorkerMessage) => port.postMessage(m);

try {
  const sim = await startSim({ ...opts, logger: logLevel ? createLogger(logLevel, undefined, { component: 'paper-broker' }) : undefined });
  port.on('message', (m: { type?: string }) => {
    if (m?.type === 'usage') return post({ type: 'usage', usage: threadUsage() });
    if (m?.type !== 'close') return;
    void sim.close().then(() => {
      post({ type: 'closed' });
      port.close();
    });
  });
  post({ type: 'ready', port: sim.port, url: sim.url, restUrl: sim.restUrl, wsUrl: sim.wsUrl, controlUrl: sim.controlUrl });
} catch (err) {
  post({ type: 'error', message: err instanceof Error ? err.message : String(err) });
  port.close();
}
