/**
 * comlink's Node adapter is a UMD file whose `.d.ts` declares an ES default export; under
 * NodeNext TypeScript sees the CommonJS namespace instead of the function. At run time the
 * default import is the function itself. This is the one place that bridges the two.
 */
import adapter from 'comlink/dist/umd/node-adapter.js';

type NodeEndpointFn = typeof adapter.default;

/** Wraps a worker_threads Worker / MessagePort / parentPort as a comlink endpoint. */
export const nodeEndpoint: NodeEndpointFn =
  typeof adapter === 'function' ? (adapter as unknown as NodeEndpointFn) : (adapter as { default: NodeEndpointFn }).default;
