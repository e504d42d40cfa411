/**
 * The spec an actor is started with, built from a stored connection and its opened
 * credentials. Every live connection goes through here (serve at start-up, POST /connections).
 */
import type { BrokerCredentials, BrokerKind, ConnectionSpec, Environment } from '../domain/connections.js';
import { BROKER_BUDGETS } from '../tuning.js';

/** What the spec needs of a stored connection (a store ConnectionRecord is one). */
export interface ConnectionSource {
  id: string;
  userId: string;
  broker: BrokerKind;
  environment: Environment;
  restUrl: string;
  wsUrl: string;
  createdAt?: string;
}

/**
 * The actor spec for a connection. Paper connections follow the embedded paper broker's
 * current address when one runs (its port may change between starts); budgets per broker kind.
 */
export function connectionSpecFor(
  record: ConnectionSource,
  credentials: BrokerCredentials,
  paper?: { restUrl: string; wsUrl: string },
): ConnectionSpec {
  const usePaper = record.broker === 'paper' && paper !== undefined;
  const spec: ConnectionSpec = {
    connectionId: record.id,
    userId: record.userId,
    broker: record.broker,
    environment: record.environment,
    restUrl: usePaper ? paper.restUrl : record.restUrl,
    wsUrl: usePaper ? paper.wsUrl : record.wsUrl,
    credentials,
    budget: { ...BROKER_BUDGETS[record.broker] },
  };
  if (record.createdAt !== undefined) spec.createdAt = record.createdAt;
  const md = record.broker === 'tradovate' ? marketDataUrl(record.wsUrl) : undefined;
  if (md) spec.mdWsUrl = md;
  return spec;
}

/**
 * Tradovate serves market data on its own hosts: `demo.` → `md-demo.`, `live.` → `md.`
 * (tradovateapi.com). Other addresses (the paper broker, a proxy) serve it on the trading socket.
 */
export function marketDataUrl(wsUrl: string): string | undefined {
  const m = /^(wss?:\/\/)(demo|live)\.(tradovateapi\.com\/.*)$/.exec(wsUrl);
  if (!m) return undefined;
  return `${m[1]}${m[2] === 'demo' ? 'md-demo' : 'md'}.${m[3]}`;
}
