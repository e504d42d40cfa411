/**
 * What the Signals page needs beyond token CRUD: every alert a token receives is journaled
 * with its outcome (accepted or refused, with the problem code), listed newest first per
 * token; and a token can be rotated (new secret, same binding, old URL dead at once).
 */
import { z } from 'zod';
import { settledWithin } from '../../wait.js';
import { AppError, RequestNotSentError, type ProblemCode } from '../../domain/problems.js';
import type { PositionedEntry } from '../../store/index.js';
import type { OrderRecord, PositionRecord } from '../../domain/orders.js';
import { closedBy, openedAfter, positionsConfirmedWhen, type FlattenTarget } from './flatten.js';
import { defineRoute, type AuthContext, type RouteContext, type RouteDef, type RouteResponse } from '../route-types.js';
import { createdWebhookTokenSchema, integerQuery, listOf } from '../schemas.js';
import { AUTH_ERRORS, cursorPosition, errors, nowOf, positionCursor, refuseNarrowedKey, type RouteDeps } from './common.js';
import type { Logger } from '../../log.js';
import type { IdempotencyGate } from '../idempotency.js';
import { appErrorReply, storedAnswer } from '../respond.js';
import { alertMessageFor, tokenView, webhookUrl } from './webhook-tokens.js';

/** The journal kind of a received alert. */
export const ALERT_KIND = 'webhook-alert';
/** Journal ref of a token's alerts. */
export const alertRef = (tokenId: string): string => `webhookToken:${tokenId}`;

const text = (v: unknown): string | null => (typeof v === 'string' || typeof v === 'number' ? String(v).slice(0, 64) : null);

/** What an alert entry keeps: the fields a trader reads, never the whole payload. */
function alertRequest(body: unknown, requestId: string) {
  const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
  return {
    action: text(b['action']),
    symbol: text(b['symbol'] ?? b['ticker']),
    qty: text(b['qty'] ?? b['quantity'] ?? b['contracts']),
    alertId: text(b['id']),
    requestId,
  };
}

/** An alert's outcome as journaled. */
interface AlertOutcome {
  status: number;
  code: ProblemCode | null;
  detail: string | null;
  orderId: string | null;
  orderStatus: string | null;
  /** What the order was for: a reversal or marketPositionSize may open less than the alert's qty. */
  orderQty?: number | null;
  /** `outstandingOrders`: orders of the account the broker had not answered yet, which may fill after it (only when some). */
  flattened: { cancelledOrders: number; positions: number; outstandingOrders?: number } | null;
  /** The answer's warnings (a capped reversal, ignored fields), at most MAX_JOURNALED_WARNINGS. */
  warnings?: string[];
}

const MAX_JOURNALED_WARNINGS = 5;
/**
 * The longest detail and warning an alert entry keeps (characters). Our own messages are shorter;
 * one that quotes an alert's value is cut here too, so refused alerts cannot grow the journal
 * past its documented size (attack probe: a 65 KB symbol journaled whole per refusal).
 */
const MAX_JOURNALED_DETAIL = 1_000;
const MAX_JOURNALED_WARNING = 300;

const clip = (text: string, max: number): string => (text.length > max ? `${text.slice(0, max)}…` : text);

type FlattenSeen = { cancelledOrderIds: string[]; positions: unknown[]; outstandingOrders?: number } | null | undefined;

/**
 * What a flatten of the alert did, as the alert log counts it, with the orders still on their way
 * that may fill after it (re-probe: an exit's entry said "0 closed" and the entry then filled,
 * with nothing in the log to say it might).
 */
function flattenedOf(flatten: FlattenSeen): AlertOutcome['flattened'] {
  if (!flatten) return null;
  const counted = { cancelledOrders: flatten.cancelledOrderIds.length, positions: flatten.positions.length };
  return flatten.outstandingOrders ? { ...counted, outstandingOrders: flatten.outstandingOrders } : counted;
}

function alertOutcome(res: RouteResponse | undefined, err: unknown): AlertOutcome {
  if (res) {
    const body = res.body as { order?: { orderId: string; status: string; qty?: number } | null; flatten?: FlattenSeen; warnings?: string[] };
    return {
      status: res.status,
      code: null,
      detail: null,
      orderId: body.order?.orderId ?? null,
      orderStatus: body.order?.status ?? null,
      orderQty: body.order?.qty ?? null,
      flattened: flattenedOf(body.flatten),
      warnings: (body.warnings ?? []).slice(0, MAX_JOURNALED_WARNINGS).map((w) => clip(w, MAX_JOURNALED_WARNING)),
    };
  }
  // Withdrawn before it was acted on: its sender's connection closed with another request
  // pipelined behind it (clients probe: listed as 500 "Internal error", as if the service failed).
  if (err instanceof RequestNotSentError) {
    return { status: 499, code: null, detail: `not sent: ${err.message}; nothing reached the broker`, orderId: null, orderStatus: null, flattened: null };
  }
  const e = err instanceof AppError ? err : new AppError('INTERNAL');
  // A reversal whose open was refused after its close: the close happened (trader probe: logged as nothing flattened).
  const flattened = flattenedOf((e.extensions as { flatten?: FlattenSeen } | undefined)?.flatten);
  return { status: e.status, code: e.code as ProblemCode, detail: clip(e.message, MAX_JOURNALED_DETAIL), orderId: null, orderStatus: null, flattened };
}

/** When an alert answered 504 is looked up at the broker again (ms after the alert). */
const LATE_CHECKS_MS = [3_000, 10_000, 30_000, 120_000];
/** While no lookup could be made (the connection down), it goes on every minute, up to this many in all (~15 min). */
const LATE_CHECK_EVERY_MS = 60_000;
const LATE_CHECKS_MAX = 16;
/** A flatten's follow-up taken up after a restart looks this often while its connection comes up, this many times. */
const RESUMED_LOOK_EVERY_MS = 1_000;
const RESUMED_QUICK_LOOKS = 60;

/** Journal kind and ref of an alert answered 504 whose outcome is still being looked up (not listed with the alerts). */
export const LATE_PENDING_KIND = 'webhook-alert-late';
const LATE_PENDING_REF = 'webhook-late';

/** What a late-outcome follow-up needs, journaled as LATE_PENDING_KIND so a restart resumes it. */
interface LateFollowUp {
  userId: string;
  tokenId: string;
  connectionId: string;
  accountId: string;
  /** The order's clOrdId; absent for a flatten. */
  clOrdId?: string;
  /**
   * A flatten (exit or close) answered 504: what it was to close (null: the whole account;
   * `product`: every month of the symbol's product); `reversal`: a reversal's close, after which
   * the new position was not opened; `from`: when it was sent (ms, our clock), a position whose
   * lots began after that being a later alert's (older follow-ups, without `from`, use `since`).
   */
  flatten?: FlattenTarget & { reversal?: boolean; from?: number };
  /**
   * The alert's idempotency key and fingerprint (a flatten's): a restart holds the key until the
   * follow-up concludes, and stores carriedOutConflict under it once the positions are closed, as
   * the process that answered 504 would have (re-probe: after a stop, a repeat closed the re-entry).
   */
  repeat?: { key: string; fingerprint: string };
  /**
   * Answered 504 before it was done (waiting for its turn, or at the broker): nothing to look up
   * yet; only a restart reads it, when the alert's own outcome never made it to the journal.
   */
  queued?: true;
  /**
   * Still at work a while after it arrived (journalActing): a process killed before its answer
   * leaves a restart this to say the outcome is unknown, where the alert had no entry at all.
   */
  acting?: true;
  /** Cluster mode: the node that journaled it, the one node whose restart takes it up (resumeLateOutcomes). */
  node?: string;
  /** The alert's fields as its alerts entry keeps them, with `lateOutcomeOf`: its request id. */
  request: ReturnType<typeof alertRequest> & { lateOutcomeOf: string };
  /** When the alert arrived (ms). */
  since: number;
}

/**
 * An alert answered 504 (the broker did not confirm within the webhook's deadline) may still be
 * placed, and TradingView neither waits nor retries. Its order is looked up by its clOrdId a few
 * times over two minutes; what is found (or that nothing was) is journaled under the token as a
 * follow-up of that alert (`lateOutcomeOf`: its request id), so the Signals page shows whether it
 * traded and a trader does not send it again. The follow-up is journaled too, so a restart within
 * those minutes takes it up again (resumeLateOutcomes).
 */
export function followLateOutcome(
  deps: RouteDeps,
  ctx: RouteContext<unknown, unknown>,
  connectionId: string,
  accountId: string,
  what: { clOrdId: string } | { flatten: NonNullable<LateFollowUp['flatten']> },
): Promise<{ status: number }> | undefined {
  const followUp = journalFollowUp(deps, ctx, connectionId, accountId, what);
  return followUp ? lookUpLate(deps, ctx.log, followUp) : undefined;
}

/**
 * An alert answered 504 at the receiver's deadline goes on (alert-turns.ts); its outcome is added
 * once it is done (recordQueuedOutcome). Journaled now, so that a process stopped before that
 * leaves a restart to say the outcome is unknown, not a 504 "it goes on" as the alert's last word.
 */
export function journalQueued(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, connectionId: string, accountId: string): void {
  journalFollowUp(deps, ctx, connectionId, accountId, { queued: true });
}

/**
 * An alert still at work ACTING_MARK_MS after the receiver began on it (the broker slow, alerts
 * before it on the account): journaled, so that a process killed before it was answered leaves a
 * restart to say its outcome is unknown (faults probe: SIGKILL in the middle of a reversal, its
 * close done and its open not, and the token's alerts had no entry for it). Quick alerts write
 * nothing more than their own entry.
 */
export function journalActing(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, connectionId: string, accountId: string): void {
  journalFollowUp(deps, ctx, connectionId, accountId, { acting: true });
  actingMarked.add(ctx);
}

/**
 * Alerts journalActing marked: their own entry is on disk before their answer goes (journal
 * appends wait up to 50 ms), or a process killed right after the answer left only the mark, and
 * the restart said "outcome unknown … before it answered" of an alert answered 201 (re-probe).
 */
const actingMarked = new WeakSet<object>();
/** Longest an answer waits for that (TradingView gives an alert about 3 s). */
const ANSWER_FLUSH_MS = 200;

/** How long an alert is at work before journalActing marks it. */
export const ACTING_MARK_MS = 250;

/**
 * What a repeat of an alert that closed positions is answered once that is known done (a webhook
 * close or exit answered `status` and went on): not acted on again, as it would close or reverse
 * positions a second time.
 */
export function carriedOutConflict(status: number, firstRequestId: string, reversalClosedOnly = false): AppError {
  // A reversal whose close timed out: the close was carried out, its new position never opened (re-probe: "it was carried out").
  const what = reversalClosedOnly
    ? "its close was carried out, and the reversal's new position was not opened (as its answer said)"
    : 'it was carried out';
  return new AppError(
    'CONFLICT',
    `This alert was answered ${status} and went on, and ${what}: a repeat of it (the same id and body) is not acted on again, as it would close or reverse positions a second time. Its outcome is in this token's alerts (GET /api/v1/webhook-tokens/{id}/alerts)`,
    { firstRequestId },
  );
}

function journalFollowUp(
  deps: RouteDeps,
  ctx: RouteContext<unknown, unknown>,
  connectionId: string,
  accountId: string,
  what: Pick<LateFollowUp, 'clOrdId' | 'flatten' | 'queued' | 'acting'>,
): LateFollowUp | undefined {
  const token = ctx.auth.webhook;
  if (!token) return undefined;
  const followUp: LateFollowUp = {
    userId: ctx.auth.userId,
    tokenId: token.tokenId,
    connectionId,
    accountId,
    ...what,
    ...(what.flatten && ctx.idempotencyKey !== undefined && ctx.idempotencyFingerprint !== undefined && { repeat: { key: ctx.idempotencyKey, fingerprint: ctx.idempotencyFingerprint } }),
    request: { ...alertRequest(ctx.req.body, ctx.requestId), lateOutcomeOf: ctx.requestId },
    since: nowOf(deps).getTime(),
    ...(deps.nodeId !== undefined && { node: deps.nodeId }),
  };
  deps.store.journal.append({ userId: followUp.userId, accountId, kind: LATE_PENDING_KIND, ref: LATE_PENDING_REF, request: followUp, outcome: null });
  return followUp;
}

/**
 * An alert answered 504 before it was done (it waited for the alerts before it on its account,
 * alert-turns.ts, or the broker was slow) goes on; what it did is added to its token's alerts, as
 * a late outcome of the 504. One whose own broker call timed out is followed by followLateOutcome.
 */
export function recordQueuedOutcome(deps: RouteDeps, ctx: RouteContext<unknown, unknown>, accountId: string, res: RouteResponse | undefined, err: unknown): void {
  const token = ctx.auth.webhook;
  if (!token || (err instanceof AppError && err.code === 'BROKER_TIMEOUT')) return;
  const outcome = alertOutcome(res, err);
  // Refused because the service was stopping, before anything of it was done (no close of a
  // reversal rides on it): it did not act (faults probe: "acted on … actor supervisor is closed").
  const stopped = err instanceof AppError && err.code === 'SHUTTING_DOWN' && !('flatten' in err.extensions);
  // Refused before anything was sent (the connection down past the alert's retries): nothing done either (re-probe 6: "acted on").
  const unsent = err instanceof AppError && err.code === 'BROKER_UNAVAILABLE' && !('flatten' in err.extensions);
  const prefix = stopped
    ? 'not acted on after this alert was answered 504, nothing was sent: the service was stopping'
    : unsent
      ? 'not acted on after this alert was answered 504, nothing was sent'
      : 'acted on after this alert was answered 504';
  outcome.detail = outcome.detail === null ? prefix : `${prefix}: ${outcome.detail}`;
  const request = { ...alertRequest(ctx.req.body, ctx.requestId), lateOutcomeOf: ctx.requestId };
  deps.store.journal.append({ userId: ctx.auth.userId, accountId, kind: ALERT_KIND, ref: alertRef(token.tokenId), request, outcome });
}

/**
 * Takes up the follow-ups a stopped process left: those journaled in the last LATE_RESUME_MS
 * without their outcome entry. Each goes on from where its schedule stands now. In a cluster, a
 * node takes up only those it journaled itself (under its --node-id), so a restarted node takes
 * up its own once and the others' stay theirs.
 */
export async function resumeLateOutcomes(deps: RouteDeps, log: Logger, gate?: IdempotencyGate): Promise<number> {
  const now = nowOf(deps).getTime();
  // The follow-ups of every user, read by their own ref: a flood of one user's alerts cannot push
  // another's out of the scan (attack probe). Only the last day's: none older is taken up.
  const since = now - Math.max(LATE_RESUME_MS, QUEUED_RESUME_MS);
  const pending = (await deps.store.journal.listByRef({ userId: undefined, ref: LATE_PENDING_REF, limit: LATE_RESUME_SCAN, since })).filter(
    (e) => (e.request as LateFollowUp).node === deps.nodeId,
  );
  // Outcomes are matched by user, token and request id: request ids are the client's to choose
  // (X-Request-Id), and one user's alert must never count as another's outcome (attack probe: a
  // user hid another's "outcome unknown" by sending their next request id).
  const outcomeOf = (userId: string, tokenId: string, requestId: string): string => JSON.stringify([userId, tokenId, requestId]);
  const done = new Set<string>();
  /** Follow-ups that concluded "flat" (the positions their flatten was to close are closed). */
  const closed = new Set<string>();
  /** Alerts whose own entry (their answer) was journaled. */
  const answered = new Set<string>();
  const read = new Set<string>();
  for (const e of pending) {
    const f = e.request as LateFollowUp;
    const token = JSON.stringify([f.userId, f.tokenId]);
    if (read.has(token)) continue;
    read.add(token);
    for (const a of await deps.store.journal.listByRef({ userId: f.userId, ref: alertRef(f.tokenId), limit: LATE_RESUME_SCAN })) {
      if (a.kind !== ALERT_KIND) continue;
      const request = a.request as { lateOutcomeOf?: unknown; requestId?: unknown } | null;
      if (typeof request?.lateOutcomeOf === 'string') {
        done.add(outcomeOf(f.userId, f.tokenId, request.lateOutcomeOf));
        if ((a.outcome as { status?: unknown } | null)?.status === 200) closed.add(outcomeOf(f.userId, f.tokenId, request.lateOutcomeOf));
      }
      else if (typeof request?.requestId === 'string') answered.add(outcomeOf(f.userId, f.tokenId, request.requestId));
    }
  }
  let resumed = 0;
  /**
   * A flatten's alert id, held again (409 IDEMPOTENCY_KEY_IN_USE to repeats) until its follow-up
   * concludes, then carriedOutConflict stored under it if the positions are closed: the process
   * that held it stopped (a graceful stop does not wait two minutes of follow-up), and its repeat
   * closed the position a later alert had opened (re-probe). Not closed: the id is free again.
   */
  const holdForRepeats = (f: LateFollowUp, outcome: Promise<{ status: number }>): void => {
    if (!gate || !f.flatten || !f.repeat) return;
    const { key: idKey, fingerprint } = f.repeat;
    void (async () => {
      const began = await gate.begin(f.userId, idKey, fingerprint);
      // Stored already (the answer for repeats, or another alert's under this id), or held here.
      if (began.kind !== 'proceed') return;
      const found = await outcome.catch(() => undefined);
      if (found?.status !== 200) return began.ticket.release();
      await began.ticket.commit(storedAnswer(appErrorReply(carriedOutConflict(504, f.request.lateOutcomeOf, f.flatten?.reversal === true))));
    })().catch((err: unknown) => log.warn({ err, requestId: f.request.lateOutcomeOf }, 'the answer for repeats of an alert answered 504 was not stored'));
  };
  const queued: LateFollowUp[] = [];
  const acting: LateFollowUp[] = [];
  const key = (f: LateFollowUp): string => outcomeOf(f.userId, f.tokenId, f.request.lateOutcomeOf);
  for (const e of pending) {
    if (e.kind !== LATE_PENDING_KIND) continue;
    const f = e.request as LateFollowUp;
    if (done.has(key(f))) {
      // Concluded flat, and the process stopped before the answer for repeats was stored (or as it was).
      if (closed.has(key(f))) holdForRepeats(f, Promise.resolve({ status: 200 }));
      continue;
    }
    if (f.acting) {
      if (now - f.since < QUEUED_RESUME_MS) acting.push(f);
      continue;
    }
    // Saying an outcome is unknown is right however late the restart; a look-up only within its schedule.
    if (f.queued) {
      if (now - f.since < QUEUED_RESUME_MS) queued.push(f);
      continue;
    }
    if (now - f.since >= LATE_RESUME_MS) continue;
    done.add(key(f));
    holdForRepeats(f, lookUpLate(deps, log, f, true));
    resumed++;
  }
  /** Says once that an alert's outcome is unknown: the process stopped before it was journaled. */
  const unknownOutcome = (f: LateFollowUp, detail: string): void => {
    done.add(key(f));
    const outcome = { status: 504, code: 'BROKER_TIMEOUT', detail, orderId: null, orderStatus: null, flattened: null };
    deps.store.journal.append({ userId: f.userId, accountId: f.accountId, kind: ALERT_KIND, ref: alertRef(f.tokenId), request: f.request, outcome });
    resumed++;
  };
  // Answered 504 at the deadline, then the process stopped before the alert's outcome was
  // journaled (and before any order of it timed out, which has its own follow-up above): it may
  // have traded, or not. Said so once, instead of the 504's "it goes on".
  for (const f of queued) {
    if (done.has(key(f))) continue;
    unknownOutcome(
      f,
      'outcome unknown: the service stopped after this alert was answered 504, before its outcome was known (it was waiting for its turn on the account or for the broker); look at the account’s positions and working orders before sending anything again',
    );
  }
  // Killed at work, before its answer was journaled: whatever of it reached the broker, nothing says so.
  for (const f of acting) {
    if (done.has(key(f)) || answered.has(key(f))) continue;
    unknownOutcome(
      f,
      'outcome unknown: the service stopped while it was acting on this alert, before it answered (part of it, such as the close of a reversal, may have been done); look at the account’s positions and working orders before sending anything again',
    );
  }
  if (resumed > 0) log.info({ resumed }, 'webhook 504 follow-ups resumed');
  return resumed;
}

/** How far back a restart looks for follow-ups (past the last scheduled check). */
const LATE_RESUME_MS = 20 * 60_000;
/** How far back a restart says "outcome unknown" for alerts answered 504 at the deadline (re-probe: an overnight crash said nothing). */
const QUEUED_RESUME_MS = 24 * 3_600_000;
/** How many follow-ups a restart reads, and how many of each of their tokens' newest alert entries. */
const LATE_RESUME_SCAN = 5_000;

/** Looks the alert's outcome up on its schedule and journals it; resolves with what it journaled. */
function lookUpLate(deps: RouteDeps, log: Logger, f: LateFollowUp, resumed = false): Promise<{ status: number }> {
  let concluded!: (outcome: AlertOutcome) => void;
  const conclusion = new Promise<AlertOutcome>((resolve) => (concluded = resolve));
  const record = (outcome: AlertOutcome) => {
    deps.store.journal.append({ userId: f.userId, accountId: f.accountId, kind: ALERT_KIND, ref: alertRef(f.tokenId), request: f.request, outcome });
    concluded(outcome);
  };
  // A resumed follow-up goes on from where its schedule stands: the checks already due run at once, once.
  const elapsed = nowOf(deps).getTime() - f.since;
  let attempt = LATE_CHECKS_MS.findIndex((at) => at > elapsed);
  if (attempt < 0) attempt = LATE_CHECKS_MS.length - 1;
  let looked = false;
  /** A resumed flatten's looks while its connection comes up (every RESUMED_LOOK_EVERY_MS), before the schedule's. */
  let quickLooks = RESUMED_QUICK_LOOKS;
  const again = (): boolean => {
    if (++attempt < LATE_CHECKS_MS.length || (!looked && attempt < LATE_CHECKS_MAX)) {
      const wait = attempt < LATE_CHECKS_MS.length ? LATE_CHECKS_MS[attempt]! - LATE_CHECKS_MS[attempt - 1]! : LATE_CHECK_EVERY_MS;
      setTimeout(() => void (f.flatten ? checkFlat(f.flatten) : check()), wait).unref();
      return true;
    }
    return false;
  };
  // A flatten carries on in the actor after its 504: it is done once the positions it was to close are.
  const checkFlat = async (target: NonNullable<LateFollowUp['flatten']>): Promise<void> => {
    let open: PositionRecord[] | undefined;
    try {
      // "Flat" confirmed with the broker's own list: lost events leave the service flat where the broker is not.
      const stillOpen = (rows: PositionRecord[]) => rows.filter((p) => p.netQty !== 0 && closedBy(target, p.symbol) && !openedAfter(p, target.from ?? f.since));
      const rows = await positionsConfirmedWhen(deps, f.connectionId, f.accountId, (r) => stillOpen(r).length === 0);
      looked = true;
      // A position whose lots began after the flatten was sent is a later alert's, not the one this
      // flatten was to close: that one went flat (re-probe: "still holds long 1; flatten it
      // yourself" about the re-entry the next alert opened once this one's turn ended). Counted from
      // the flatten, not from this follow-up (its 504, 2.5 s later): a re-entry filled within the
      // margin after the 504 read as the exit's, the follow-up said "not flat", the alert's id was
      // freed, and its repeat closed the re-entry (re-probe).
      open = stillOpen(rows);
    } catch {
      // Not CONNECTED now: asked again at the next check.
    }
    if (open?.length === 0) {
      const detail = target.reversal
        ? "flat after this alert was answered 504: the positions it was to close are closed (by it or another exit); the reversal's new position was not opened (nothing more is sent for this alert)"
        : 'flat after this alert was answered 504: the positions it was to close are closed (by it or another exit)';
      record({ status: 200, code: null, detail, orderId: null, orderStatus: null, flattened: null });
      return;
    }
    const held = open?.map((p) => `${p.symbol} ${p.netQty > 0 ? 'long' : 'short'} ${Math.abs(p.netQty)}`).join(', ');
    // Taken up after a restart, the flatten is over: it stopped with the process that ran it. What
    // the first look finds is final, and the alert's id, held meanwhile, is free at once if not flat.
    if (resumed && held !== undefined) {
      const detail = `not flat after the service restarted: the flatten this alert began was cut short when the service stopped; the account still holds ${held}. Delivered again, the alert closes it`;
      record({ status: 504, code: 'BROKER_TIMEOUT', detail, orderId: null, orderStatus: null, flattened: null });
      return;
    }
    if (resumed && quickLooks-- > 0) {
      setTimeout(() => void checkFlat(target), RESUMED_LOOK_EVERY_MS).unref();
      return;
    }
    if (again()) return;
    record({
      status: 504,
      code: 'BROKER_TIMEOUT',
      detail: held ? `not flat two minutes after this alert: the account still holds ${held}; flatten it yourself` : 'outcome unknown: the connection could not be asked since; check the account’s positions',
      orderId: null,
      orderStatus: null,
      flattened: null,
    });
  };
  const check = async (): Promise<void> => {
    let order: OrderRecord | null = null;
    try {
      order = await deps.gateway.request(f.connectionId, { type: 'find-by-clordid', accountId: f.accountId, clOrdId: f.clOrdId! });
      looked = true;
    } catch {
      // The connection is not CONNECTED now (or no longer exists): asked again at the next check.
    }
    if (order?.status === 'rejected') {
      record({ status: 422, code: 'BROKER_REJECTED', detail: `not placed: the broker rejected it after this alert was answered 504 (${order.rejectReason ?? 'rejected'})`, orderId: order.orderId, orderStatus: order.status, flattened: null });
      return;
    }
    if (order) {
      log.warn({ orderId: order.orderId, accountId: f.accountId }, 'webhook order placed after its 504');
      record({ status: 201, code: null, detail: 'placed after this alert was answered 504', orderId: order.orderId, orderStatus: order.status, flattened: null });
      return;
    }
    if (again()) return;
    // "Not placed" only from an answer of the broker's own list; a connection down all along says nothing.
    record(
      looked
        ? { status: 504, code: 'BROKER_TIMEOUT', detail: 'not placed: the broker has no order for this alert two minutes after it', orderId: null, orderStatus: null, flattened: null }
        : { status: 504, code: 'BROKER_TIMEOUT', detail: 'outcome unknown: the connection could not be asked since; check the account’s orders before sending it again', orderId: null, orderStatus: null, flattened: null },
    );
  };
  setTimeout(() => void (f.flatten ? checkFlat(f.flatten) : check()), Math.max(0, LATE_CHECKS_MS[attempt]! - elapsed)).unref();
  return conclusion;
}

/** Wraps the webhook receiver so each alert that reaches it is journaled under its token. */
export function journalAlerts(deps: RouteDeps, route: RouteDef<any, any>): RouteDef<any, any> {
  const inner = route.handler;
  const journal = (auth: AuthContext, body: unknown, requestId: string, res: RouteResponse | undefined, err: unknown) => {
    const token = auth.webhook;
    if (!token) return;
    deps.store.journal.append({ userId: auth.userId, accountId: token.accountId, kind: ALERT_KIND, ref: alertRef(token.tokenId), request: alertRequest(body, requestId), outcome: alertOutcome(res, err) });
  };
  const record = (ctx: RouteContext<unknown, unknown>, res: RouteResponse | undefined, err: unknown) => journal(ctx.auth, ctx.req.body, ctx.requestId, res, err);
  return {
    ...route,
    // Refused before the handler (not JSON, invalid, the id reused): listed too (re-probe: a broken
    // template left no trace). A copy of an alert still at work (the same id, delivered again
    // meanwhile) is not: the alert is listed once, as a repeat sent later is (clients probe: five
    // copies at once listed four 409s beside the one that traded).
    refused: ({ auth, body, requestId }, err) => {
      if (err instanceof AppError && err.code === 'IDEMPOTENCY_KEY_IN_USE') return;
      journal(auth, body, requestId, undefined, err);
    },
    async handler(ctx) {
      let res: RouteResponse;
      try {
        res = await inner(ctx);
      } catch (err) {
        record(ctx, undefined, err);
        if (actingMarked.has(ctx)) await settledWithin(deps.store.flushed(), ANSWER_FLUSH_MS);
        throw err;
      }
      record(ctx, res, undefined);
      if (actingMarked.has(ctx)) await settledWithin(deps.store.flushed(), ANSWER_FLUSH_MS);
      return res;
    },
  };
}

export const alertSchema = z.object({
  id: z.string().describe("The entry's own id in this list (unique; requestId is the client's to choose, so it may repeat)"),
  at: z.string().describe('When the alert arrived (ISO-8601)'),
  accountId: z.string().nullable().describe('The account the token was bound to then'),
  action: z.string().nullable(),
  symbol: z.string().nullable(),
  qty: z.string().nullable(),
  alertId: z.string().nullable().describe('The payload `id` (dedupe key), if sent'),
  status: z.number().describe('HTTP status the alert was answered with'),
  code: z.string().nullable().describe('Problem code when refused, e.g. ACCOUNT_INACTIVE'),
  detail: z.string().nullable(),
  orderId: z.string().nullable(),
  orderStatus: z.string().nullable(),
  orderQty: z.number().nullable().describe('The quantity the order was placed for: less than qty when a reversal closed a position first or marketPositionSize capped it'),
  flattened: z
    .object({
      cancelledOrders: z.number(),
      positions: z.number(),
      outstandingOrders: z.number().optional().describe('Orders of the account the broker had not answered yet (on their way, or timed out): they may fill after this close; only when some'),
    })
    .nullable(),
  warnings: z.array(z.string()).describe("The answer's warnings (fields ignored, a reversal's close, a size cap), at most 5"),
  requestId: z.string(),
  lateOutcomeOf: z.string().nullable().describe('On a follow-up: the requestId of the alert answered 504 whose order this entry reports (placed late, or not at all)'),
});

function alertView(e: PositionedEntry) {
  const req = e.request as ReturnType<typeof alertRequest>;
  const out = e.outcome as ReturnType<typeof alertOutcome>;
  // Alerts journaled before orderQty and warnings were kept read as none.
  return { id: e.position, at: new Date(e.ts).toISOString(), accountId: e.accountId, lateOutcomeOf: null, orderQty: null, warnings: [], ...req, ...out };
}

/** Strict like every query: a typo is a 400. */
const alertsQuerySchema = z.strictObject({
  limit: integerQuery(1, 100).optional().describe('1..100, default 20'),
  cursor: z.string().max(200).optional().describe("The previous page's nextCursor: the alerts older than that page's last"),
});

/** Alerts list and rotation routes. */
export function signalRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  const alerts = defineRoute<undefined, z.output<typeof alertsQuerySchema>>({
    method: 'GET',
    path: '/webhook-tokens/:id/alerts',
    scope: 'read',
    operationId: 'listWebhookAlerts',
    summary: "A token's recent alerts with their outcome, newest first (from the journal)",
    description:
      'The alerts newest first, `limit` (default 20, at most 100) per page; `?cursor=` (the previous page’s nextCursor, null on the last page) ' +
      'continues with the alerts older than that page’s last, so alerts arriving meanwhile neither repeat nor shift a page. Kept 90 days (README, data kept). ' +
      'Alerts refused before the token was recognised (an unknown URL) or by its rate limit are not listed; those refused after (not JSON, invalid fields) are; replays of a deduplicated alert are not listed again.',
    tags: ['webhooks'],
    query: alertsQuerySchema,
    responses: [{ status: 200, description: 'Alerts', schema: listOf(alertSchema) }, ...errors('VALIDATION_FAILED', ...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      const id = ctx.req.params.id!;
      if (!deps.store.webhookTokens.getForUser(ctx.auth.userId, id)) throw new AppError('NOT_FOUND', 'Not found');
      const list = `alerts/${id}`;
      const before = cursorPosition(ctx.req.query.cursor, list);
      const limit = ctx.req.query.limit ?? 20;
      // One more than the page: whether there is a next page is known without a second read.
      const entries = await deps.store.journal.listByRef({ userId: ctx.auth.userId, ref: alertRef(id), limit: limit + 1, ...(before !== undefined && { before }) });
      const page = entries.slice(0, limit);
      const nextCursor = entries.length > limit ? positionCursor(list, page[page.length - 1]!.position) : null;
      return { status: 200, body: { data: page.filter((e) => e.kind === ALERT_KIND).map(alertView), nextCursor } };
    },
  });

  const rotate = defineRoute({
    method: 'POST',
    path: '/webhook-tokens/:id/rotate',
    scope: 'trade',
    operationId: 'rotateWebhookToken',
    refusesIdempotencyKey: true,
    summary: 'New secret URL for a token (same account and strategy); the old URL stops working at once',
    tags: ['webhooks'],
    responses: [{ status: 200, description: 'The new URL', schema: createdWebhookTokenSchema }, ...errors(...AUTH_ERRORS, 'NOT_FOUND')],
    async handler(ctx) {
      if (!deps.store.webhookTokens.getForUser(ctx.auth.userId, ctx.req.params.id!)) throw new AppError('NOT_FOUND', 'Not found');
      refuseNarrowedKey(ctx.auth, 'rotate webhook tokens');
      const rotated = await deps.store.webhookTokens.rotate(ctx.auth.userId, ctx.req.params.id!);
      if (!rotated) throw new AppError('NOT_FOUND', 'Not found');
      return { status: 200, headers: { 'Cache-Control': 'no-store' }, body: { ...tokenView(deps, rotated.record), url: webhookUrl(deps, rotated.token), token: rotated.token, alertMessage: alertMessageFor(deps, rotated.record) } };
    },
  });

  return [alerts, rotate];
}
