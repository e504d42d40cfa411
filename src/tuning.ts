/**
 * Timing and budget defaults of the service, named in one place. Unlike config.ts these are
 * not user settings: they follow the broker's documented behaviour (heartbeats, token
 * lifetime, request budgets) or bound the service's own waiting. Tests pass shorter values
 * where an option takes them (ConnectionTuning, the supervisor's options).
 */

/** Timing knobs of one broker connection. */
export interface ConnectionTuning {
  /** Client `[]` heartbeat cadence (the broker expects one every 2.5 s). */
  heartbeatMs: number;
  /** No frame at all for this long → the socket is dead (the server sends `h` every ~2.5 s). */
  silenceMs: number;
  /** No frame for this long (two heartbeats) → reads answer 503 until one comes: the mirror may be missing events. */
  readQuietMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
  /** Consecutive refused `authorize`s with fresh tokens before giving up (FAILED). */
  maxAuthRejections: number;
  /** How long place/cancel/flatten wait for the broker's events after its answer. */
  settleMs: number;
  /** `account/list` poll period; 0 disables (props events alone then drive accounts). */
  accountPollMs: number;
  /** How often the mirror's positions are compared with the broker's `position/list` (a difference reads the whole state again); 0 disables. */
  positionCheckMs: number;
  /** How often the risk guards look at the clock (trading windows closing, locks expiring, a new trading day). */
  guardTickMs: number;
  /** The longest a timed-out order's outcome stays unknown (see UNKNOWN_OUTCOME_MAX_MS). */
  unknownOutcomeMaxMs: number;
  /**
   * How long after a position goes flat, changes side or shrinks its contract's bracket legs are
   * fitted to it (orphan-legs.ts): a filled leg's OCO sibling is cancelled by the broker meanwhile.
   */
  orphanLegGraceMs: number;
  /** How long a finished order with nothing filled stays in the actor after it ended (FINISHED_ORDER_RETENTION_MS). */
  finishedOrderRetentionMs: number;
  /**
   * How long a connection waits after the broker's 429 before it logs in again: Tradovate holds
   * the login out for up to an hour and every request meanwhile extends it.
   */
  rateLimitHoldMs: number;
  /**
   * How long a request the broker refused with 401 (its token died) waits for the connection to
   * log in again before it is sent once more; past it, 503.
   */
  reauthRetryMs: number;
  /**
   * Tests only: a clock shared with the test thread (a SharedArrayBuffer view; crosses into
   * workers through workerData). Non-zero slot 0 is the actor's "now" in ms; 0 = the real clock.
   */
  fakeClock?: BigInt64Array;
}

/**
 * The longest an order's outcome stays unknown after its broker request timed out. Until then
 * a retry with its clOrdId places nothing (neither Tradovate nor the paper broker refuses a
 * repeated clOrdId, so a new order could be a duplicate) and the order's contracts stay held
 * for the risk guards. It is a backstop: the outcome is normally known within the broker's own
 * late answer, the order showing up in the mirror, or — on a broker that went quiet — the
 * silence watchdog (10 s) and the next full sync. Past it the key is released, logged as an
 * error: a broker that holds an order unanswered for five minutes on a live socket has lost it
 * in all likelihood, and a longer wait would keep refusing the key's retries (504) and keep the
 * contracts held long after any signal that sent the order has gone stale.
 */
export const UNKNOWN_OUTCOME_MAX_MS = 5 * 60_000;

/** How long Tradovate may hold a login out after a 429 ("wait up to 1 h"): the Retry-After of that answer. */
export const BROKER_RATE_LIMIT_HOLD_MS = 3_600_000;

/** An idempotent answer replays for this long (DESIGN §3); older records read as absent until swept. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * How long a finished order with nothing filled stays in its actor (finished-orders.ts): past the
 * idempotency window, since a retry with the same key (or an alert's repeat) is reconciled by
 * clOrdId against the actor's orders. At 30 minutes, a retry of a 504'd order the user had
 * cancelled meanwhile placed a second order (re-probe).
 */
export const FINISHED_ORDER_RETENTION_MS = IDEMPOTENCY_TTL_MS + 60 * 60 * 1000;

/** Production connection timings. */
export const CONNECTION_TUNING: Readonly<ConnectionTuning> = Object.freeze({
  heartbeatMs: 2500,
  silenceMs: 10_000,
  readQuietMs: 5_000,
  backoffBaseMs: 500,
  backoffMaxMs: 30_000,
  maxAuthRejections: 3,
  settleMs: 5000,
  accountPollMs: 60_000,
  positionCheckMs: 30_000,
  guardTickMs: 1000,
  unknownOutcomeMaxMs: UNKNOWN_OUTCOME_MAX_MS,
  orphanLegGraceMs: 1000,
  finishedOrderRetentionMs: FINISHED_ORDER_RETENTION_MS,
  rateLimitHoldMs: BROKER_RATE_LIMIT_HOLD_MS,
  reauthRetryMs: 5000,
});

/** Broker deadlines: one request (REST or socket) when the spec names none, and opening a socket. */
/**
 * How long a leg cancel of a filled bracket waits for the survivor it owes to be stored before it
 * sends the cancel (an LMDB commit is ~1-3 ms; a NATS write a few more). Past it the cancel goes
 * on, logged: a stalled store must not hold trading.
 */
export const ACTOR_OWED_LEGS = Object.freeze({ storeWaitMs: 2_000 });

export const BROKER_TIMEOUTS = Object.freeze({ requestMs: 10_000, openMs: 10_000 });

/** Some deployments never send the `o` frame: authorize this long after the socket opens anyway. */
export const AUTHORIZE_GRACE_MS = 500;

/** The longest p-ticket penalty (seconds) worth waiting out; longer ones fail as BROKER_UNAVAILABLE. */
export const MAX_PENALTY_SECONDS = 120;

/**
 * The longest p-ticket penalty (seconds) a request that changes something at the broker (an order,
 * a cancel, a modify, a liquidation) waits out before it is sent with the ticket; longer, it fails
 * as BROKER_UNAVAILABLE with nothing sent. Well inside every caller's deadline
 * (a webhook's 2.5 s included, with the broker's answer), so an order is never placed after its
 * caller was told it timed out.
 */
export const ORDER_PENALTY_WAIT_S = 2;

/** Access-token renewal (Tradovate tokens live 80 min and can be renewed before they expire). */
export const TOKEN_RENEWAL = Object.freeze({
  /** Renew this long before expiry (lifetimes shorter than twice this renew at 80 %). */
  leadMs: 10 * 60_000,
  /**
   * Retry a renewal that failed for a transient reason after this long, doubling with each failure
   * up to retryMaxMs (Tradovate allows 15 renewals an hour, 15 s apart, and counts every one).
   */
  retryMs: 15_000,
  retryMaxMs: 5 * 60_000,
  /** Lifetime assumed when an answer names no usable expiry. */
  assumedLifetimeMs: 80 * 60_000,
});

/** Broker request budgets per connection (DESIGN §3): paper is generous so `bench` can push it. */
export const BROKER_BUDGETS = Object.freeze({
  paper: Object.freeze({ perMinute: 1_000_000, perHour: 60_000_000 }),
  tradovate: Object.freeze({ perMinute: 80, perHour: 5_000 }),
});

/** The actor supervisor on the front thread. */
export const SUPERVISOR = Object.freeze({
  /** Deadline of one call into an actor worker (BROKER_TIMEOUT past it). */
  callTimeoutMs: 15_000,
  /**
   * Requests one connection may have in flight. Past it the answer is an immediate 503 with
   * Retry-After instead of an unbounded queue: under overload clients get a fast, safe "retry"
   * (nothing was sent) rather than timeouts and a backlog that keeps placing orders long after
   * they gave up. Sized so that a webhook burst (1,000 alerts on one account inside a second, the
   * design's case) fits: alerts are never retried by TradingView, so a 503 loses them, while the
   * actor works such a burst off in about a second.
   */
  maxInFlightPerConnection: 2048,
  /** A crashed worker is restarted after base × 2^restarts ms, at most maxMs … */
  restartBaseMs: 100,
  restartMaxMs: 5000,
  /** … and its crash history is forgotten once it stays up this long. */
  restartStableMs: 30_000,
  /**
   * How often connections refused for an account id another connection serves are checked
   * again (that one deleted by the CLI while it was not running: nothing else tells the supervisor).
   */
  refusalRecheckMs: 2_000,
  /**
   * At shutdown: each actor's remove call, and the bound on one worker's whole goodbye. Past the
   * actor's own drain (10 s for a flatten, cancel or placement under way: workers/connection-actor
   * actor.ts STOP_DRAIN_MS): an actor with nothing under way stops at once, and one mid-flatten is
   * not cut between cancelling a position's legs and closing it (faults probe: SIGTERM 200 ms after
   * a reversal's 504 left a naked long 1; the bound was 2.5 s).
   */
  closeRemoveMs: 11_000,
  closeBoundMs: 12_000,
});

/** Broker deadline for webhook alerts: well inside TradingView's 3 s. */
export const WEBHOOK_BROKER_TIMEOUT_MS = 2_500;

/** Open SSE streams and their credentials (src/http/stream-guard.ts). */
export const STREAM_GUARD = Object.freeze({
  /**
   * How often each open stream's credential is read again, so a key revoked by another process
   * (the CLI) ends its streams within this bound; revocations in this process end them at once.
   */
  recheckMs: 1000,
});

/** Connections changed by another process (the CLI) while serve runs (src/actors/connection-sync.ts). */
export const CONNECTION_SYNC = Object.freeze({
  /** How often the stored connections are looked at (one LMDB read while nothing changed). */
  recheckMs: 1000,
  /** A start that failed (the actor ceiling, the paper broker restarting) is tried again after this long. */
  retryMs: 30_000,
});

/**
 * How much journal is kept (README "Limits and quotas"): every alert a token receives is journaled,
 * refused ones too, so without a bound one leaked webhook URL could fill the disk.
 */
export const JOURNAL = Object.freeze({
  /** Entries older than this are deleted. */
  retentionMs: 90 * 24 * 3_600_000,
  /** Past this many entries a user's oldest are deleted (~65 MB of a user's alerts and orders). */
  maxEntriesPerUser: 100_000,
  /** The LMDB journal is swept this often (and once at start-up); the cluster's stream enforces both limits itself. */
  sweepMs: 60_000,
  /** Largest number of entries one sweep deletes (keeps each write transaction short). */
  sweepBatch: 5_000,
});

/** `tradegate serve`. */
export const SERVE = Object.freeze({
  /** Requests in flight get this long to finish at shutdown. */
  shutdownGraceMs: 10_000,
  /** The first-run banner waits this long for the demo connection's account ids. */
  demoAccountsWaitMs: 10_000,
  /** Expired idempotency records are deleted this often (and once at start-up). */
  idempotencySweepMs: 60_000,
  /** Expired web sessions are deleted, and idle sign-in throttle state dropped, this often. */
  sessionSweepMs: 60_000,
  /** A paper broker worker that died is restarted after this long. */
  paperRestartMs: 1000,
  /** A second SIGTERM/SIGINT this long after the first stops at once (sooner: the same signal passed on twice, ignored). */
  repeatSignalForcesMs: 2000,
  /** A start that failed shuts down what it had started for at most this long, then the process exits 1. */
  failedStartShutdownMs: 10_000,
});

/**
 * Cluster mode (README "Running a cluster"). A node's lease is one KV record per node, kept in
 * two buckets whose stream leaders sit on different NATS servers, so a JetStream leader
 * election (4–9 s after a server dies on nats-server 2.9) never stops every copy at once.
 *
 * Why these numbers: a node that cannot renew stops its actors at `sent + leaseMs −
 * holderMarginMs` (by its own monotonic clock, `sent` being when it sent the last renewal
 * that was acknowledged); another node may take them over only after `expiresAt +
 * takerMarginMs` by its wall clock, where `expiresAt = sent + leaseMs` as the holder wrote
 * it. The 1.5 s between the two covers clock skew between nodes and an event loop stalled
 * past a timer. A dead node's connections restart elsewhere at most leaseMs + takerMarginMs
 * + scanMs (6.75 s) after its last renewal, plus the actor's broker login (measured: CONNECTED
 * 7.6–8.2 s after SIGKILL here): inside the 10 s target. While one lease copy's stream elects
 * a leader the other copy renews, so an election costs nothing; only an election of both
 * copies at once that outlasts leaseMs − holderMarginMs − renewMs (4.5 s) stops actors.
 */
/** Cluster timings (see CLUSTER). */
export interface ClusterTuning {
  leaseMs: number;
  renewMs: number;
  renewRetryMs: number;
  holderMarginMs: number;
  takerMarginMs: number;
  scanMs: number;
  overShareDelayMs: number;
  rebalanceMs: number;
  kvTimeoutMs: number;
  unreachableMs: number;
  placementCheckMs: number;
  forwardGraceMs: number;
  ownerChangeHoldMs: number;
  idempotencyMarkerMs: number;
  eventsMaxAgeMs: number;
}

export const CLUSTER: Readonly<ClusterTuning> = Object.freeze({
  /** A renewal makes the lease valid for this long after it was sent. */
  leaseMs: 6000,
  /** Renew this often… */
  renewMs: 500,
  /** …and this often while renewals fail. */
  renewRetryMs: 250,
  /** The holder stops this long before its lease ends. */
  holderMarginMs: 1000,
  /** A taker waits this long after a lease ended. */
  takerMarginMs: 500,
  /** How often a node looks for connections without a live owner. */
  scanMs: 250,
  /** An orphan a node would take beyond its fair share waits this long for a less loaded node. */
  overShareDelayMs: 1000,
  /**
   * A node running more than its share hands the excess to a node running two or more below
   * it, at most this often and only connections it has run this long, all of the excess in one
   * handover (a move is a reconnect, so it must not churn): how a cluster started node by node
   * spreads its actors.
   */
  rebalanceMs: 10_000,
  /** Deadline of one KV or JetStream call on the lease and event paths. */
  kvTimeoutMs: 2000,
  /**
   * A node none of whose lease renewals sent in this long was acknowledged counts as cut off
   * from NATS: /readyz answers 503 and its health streams report RECONNECTING (half the time
   * the holder has before its lease lapses, so monitors hear of it before the actors stop).
   */
  unreachableMs: 2500,
  /** How often a node checks that the two lease copies have different stream leaders. */
  placementCheckMs: 5000,
  /** Forwarded actor calls wait this much longer than the owner's own deadline, so the owner's answer wins. */
  forwardGraceMs: 500,
  /**
   * A trading request whose node stopped answering before another took its connection over keeps
   * its Idempotency-Key (or alert id) in flight this long: that node may hang rather than be dead,
   * its broker socket open, and the request on it may still be carried out — until the broker
   * drops the silent socket (Tradovate's heartbeat is 2.5 s; the paper broker drops one after 15 s
   * of silence) or its own request deadline (10 s) has long passed. A retry meanwhile sends nothing.
   */
  ownerChangeHoldMs: 30_000,
  /** An idempotency marker protects its key this long past its last renewal (its node renews it every third of this while the request runs). */
  idempotencyMarkerMs: 20_000,
  /** Health events kept for Last-Event-ID resume. */
  eventsMaxAgeMs: 24 * 60 * 60 * 1000,
});
