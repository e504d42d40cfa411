/**
 * The route table of the API (DESIGN §4), assembled from one module per resource. The HTTP
 * engine serves it under `/api/v1` and `/v1`, and `/api-docs` is generated from it.
 */
import type { RouteDef } from '../route-types.js';
import { accountRoutes } from './accounts.js';
import { apiKeyRoutes } from './api-keys.js';
import { brokerConnectionRoutes } from './broker-connections.js';
import type { RouteDeps } from './common.js';
import { connectionRoutes } from './connections.js';
import { flattenRoutes } from './flatten.js';
import { guardRoutes } from './guards.js';
import { meRoutes } from './me.js';
import { orderRoutes } from './orders.js';
import { sessionRoutes } from './session.js';
import { journalAlerts, signalRoutes } from './signals.js';
import { strategyRoutes } from './strategies.js';
import { webhookTokenRoutes } from './webhook-tokens.js';
import { webhookRoutes } from './webhooks.js';

export type { RouteDeps, PaperBroker } from './common.js';

/** Every API route, wired to the store and the actors. */
export function buildRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  return [
    ...orderRoutes(deps),
    ...accountRoutes(deps),
    ...flattenRoutes(deps),
    ...meRoutes(deps),
    ...connectionRoutes(deps),
    ...strategyRoutes(deps),
    ...webhookTokenRoutes(deps),
    ...webhookRoutes(deps).map((route) => journalAlerts(deps, route)),
    // The web app's own API (session-only routes and the reads its pages need).
    ...sessionRoutes(deps),
    ...apiKeyRoutes(deps),
    ...signalRoutes(deps),
    ...brokerConnectionRoutes(deps),
    ...guardRoutes(deps),
  ];
}
