/**
 * When what the mirror holds is not enough to act on: the broker's whole state being read again
 * (BrokerConnection.resyncing: events were lost), or a step about to close positions, which asks
 * the broker for its own first. Events lost in a silence shorter than the watchdog's leave the
 * mirror wrong without anything showing it: a position the broker closed (a stop-loss filled
 * unseen) or one it opened (a fill unseen).
 */
import { AppError } from '../../src/domain/problems.js';
import { settledWithin, valueWithin } from '../../src/wait.js';
import type { ActorContext } from './context.js';

/** How long a read or an order waits for a state read under way before it is refused (503). */
export const RESYNC_WAIT_MS = 5_000;

/** How long a flatten or a partial exit waits for the broker's answer to its position read before it goes on without. */
export const POSITIONS_READ_WAIT_MS = 2_000;

/**
 * Waits for a state read under way; 503 BROKER_UNAVAILABLE when it has not landed within
 * RESYNC_WAIT_MS. Until it lands the mirror holds what the lost events made wrong (re-probe: a
 * strategy entry sized against the state before a resync doubled the position, and GET …/positions
 * answered [] while the broker held one).
 */
export async function afterResync(ctx: Pick<ActorContext, 'conn'>): Promise<void> {
  const live = ctx.conn.resyncing?.();
  if (!live) return;
  await settledWithin(live, RESYNC_WAIT_MS);
  if (ctx.conn.resyncing?.() !== live) return;
  throw new AppError(
    'BROKER_UNAVAILABLE',
    `the account state is being read again from the broker (events may have been lost) and had not come within ${RESYNC_WAIT_MS / 1000} s: retry shortly`,
    { resyncing: true },
    1,
  );
}

/**
 * The broker's own positions, asked for at `t0` (one `position/list`; a difference reads the whole
 * state again, BrokerConnection.checkPositions): its answer waited for up to POSITIONS_READ_WAIT_MS
 * from `t0` (at a broker slower than that, the caller goes on without it), then the state read it
 * started, up to RESYNC_WAIT_MS. Both in one 2 s bound, a broker answering in 1.2 s had the
 * positions judged before the state read landed (re-probe: a flatten answered 200 "nothing to
 * close" over a partial fill its read had found).
 */
export async function brokerPositionsRead(ctx: Pick<ActorContext, 'conn'>, read: Promise<unknown> | undefined, t0: number): Promise<void> {
  if (!read) return;
  await settledWithin(read, Math.max(0, t0 + POSITIONS_READ_WAIT_MS - performance.now()));
  const live = ctx.conn.resyncing?.();
  if (live) await settledWithin(live, RESYNC_WAIT_MS);
}

/**
 * How long a flatten that finds nothing to close on the service's state waits for its position
 * read and the state read a difference starts. "Nothing to close" is said only once the broker's
 * own list agrees (re-probes: at 2–3 s a request, a flatten answered 200 "nothing to close" over a
 * position lost events had hidden, its list arriving 0.5 s after the answer; at 8–12 s, after
 * waiting, it judged the old state all the same). A flatten with positions to close goes on after
 * POSITIONS_READ_WAIT_MS, as before.
 */
export const NOTHING_TO_CLOSE_READ_WAIT_MS = 30_000;

/**
 * Whether the broker's own positions, asked for at `t0` (BrokerConnection.checkPositions: true once
 * the mirror holds them), are known within NOTHING_TO_CLOSE_READ_WAIT_MS of it.
 */
export async function positionsConfirmed(read: Promise<boolean> | undefined, t0: number): Promise<boolean> {
  if (!read) return true;
  return (await valueWithin(read.catch(() => false), Math.max(0, t0 + NOTHING_TO_CLOSE_READ_WAIT_MS - performance.now()))) === true;
}

/** How long a verified positions read waits for the broker's list and the state read a difference starts. */
export const VERIFY_WAIT_MS = 10_000;

/**
 * The mirror's positions confirmed with the broker's own list (BrokerConnection.verifyPositions);
 * 503 BROKER_UNAVAILABLE when that cannot be done within VERIFY_WAIT_MS. A follow-up concluding that
 * an exit closed its positions read the mirror alone, which events lost in a silence left flat, and
 * said "flat" while the broker was long with the entry still working (re-probe).
 */
export async function verifiedPositions(ctx: Pick<ActorContext, 'conn'>): Promise<void> {
  const verify = ctx.conn.verifyPositions;
  if (!verify) return;
  const agreed = await valueWithin(verify.call(ctx.conn), VERIFY_WAIT_MS).catch(() => false);
  if (agreed !== true) {
    throw new AppError('BROKER_UNAVAILABLE', 'the positions could not be confirmed with the broker (no answer to position/list, or the state read it started failed): retry shortly', {}, 1);
  }
}
