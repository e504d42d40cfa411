/**
 * Test support: real nats-server processes on free loopback ports (the launcher lives in
 * bench/nats-server.ts, which `bench cluster` uses too).
 */
export * from '../../bench/nats-server.js';
