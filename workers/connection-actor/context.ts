/**
 * What the order operations (place, cancel, flatten) share inside one actor: the broker
 * connection and its mirror, the order model, how long to wait for the broker's events after
 * its answer, the place attempts in flight and those whose outcome is unknown.
 */
import type { FlattenMark } from './flatten-log.js';
import type { ComingExit } from './orphan-legs.js';
import type { Logger } from '../../src/log.js';
import type { Mirror } from '../../src/broker/tradovate/mirror.js';
import type { BrokerConnection } from '../../src/broker/tradovate/connection.js';
import type { OrderModel } from './order-model.js';
import type { ActorEvent, PlaceOrderRequest, PlaceOrderResult } from '../../src/actors/protocol.js';
import type { Hold } from './exposure.js';
import type { UnknownOutcomes } from './unknown-outcomes.js';
import type { OwedLeg } from '../../src/domain/guards.js';

/** What the order operations use of the broker connection (tests stand in for it). */
export type BrokerLink = Pick<BrokerConnection, 'spec' | 'requireConnected' | 'requireFresh' | 'send' | 'ensureContract' | 'pollAccounts'> & Partial<Pick<BrokerConnection, 'reauthenticated' | 'hurry' | 'resyncNow' | 'checkPositions' | 'resyncing' | 'verifyPositions'>>;

/** Everything an order operation needs from its actor. */
export interface ActorContext {
  conn: BrokerLink;
  mirror: Mirror;
  model: OrderModel;
  /** How long to wait for broker events that follow an answer. */
  settleMs: number;
  logger: Logger;
  emit(event: ActorEvent): void;
  /** Place attempts in flight, by `accountId|clOrdId`. */
  placing: Map<string, Promise<PlaceOrderResult>>;
  /** Contracts of reduce-only orders in flight, by `accountId|symbol`: what they may still take off the position. */
  reducing: Map<string, number>;
  /** Placements that timed out at the broker, by `accountId|clOrdId`, until their outcome is known. */
  unknown: UnknownOutcomes;
  /**
   * Bracket legs owed to accounts, by the old leg's id: the survivor of a leg cancel of a filled
   * bracket from before the cancel is sent until it is back, and those whose re-placement did not
   * complete (cancel.ts).
   */
  owedLegs: Map<string, OwedLeg>;
  /**
   * Stores an account's owed legs (as owedLegs holds them now) where an actor started after a
   * crash finds them; resolves once they are durable. Absent in tests that do not restart.
   */
  keepOwedLegs?: (accountId: string) => Promise<void>;
  /** Flattens in flight, by account: a partial exit waits for them (it must see the position they leave). */
  flattening: Map<string, Promise<unknown>>;
  /** The flattens begun on each account, the last few (flatten-log.ts). */
  flattenLog?: Map<string, FlattenMark[]>;
  /** The last cancel of each bracket (or lone order), by `accountId|entry id`: they run one after another. */
  cancelling: Map<string, Promise<unknown>>;
  /**
   * Cuts the position's legs for a plain exit about to rest on it; resolves once the broker
   * answered (orphan-legs.ts), with whether a stop-loss leg was cut (or cancelled) for it.
   */
  makeRoom?: (accountId: string, coming: ComingExit) => Promise<boolean>;
  /** The exit makeRoom made room for was sent (true) or not placed (the room is undone, or said to stay while its outcome is unknown). */
  roomUsed?: (accountId: string, coming: ComingExit, failed?: { why: string; outcomeUnknown: boolean; sentQty?: number }) => Promise<void>;
  /** Exits (order ids) whose room cut a stop-loss leg: cancelled unfilled, they leave the position's stops short (cancel.ts says so). */
  stopsCutBy?: Set<string>;
  /** The risk guards: admit an order (or throw RISK_GUARD) right before it is sent. */
  guards?: { admit(req: PlaceOrderRequest): Hold | null; check(req: PlaceOrderRequest): unknown; owesFlatten?(accountId: string): boolean };
  /** Last prices (quotes), to check where a bracket's offset legs land; absent without market data. */
  market?: { lastPrice(contractId: number): Promise<number | undefined> };
}

/** Milliseconds since `t0` (performance clock), rounded to 0.1 ms. */
export function since(t0: number): number {
  return Math.round((performance.now() - t0) * 10) / 10;
}
