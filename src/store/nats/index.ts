/**
 * The store in cluster mode: the same `Store` the LMDB store implements, over NATS JetStream.
 *
 * - `<prefix>_records` (KV, history 1): users, API keys, webhook tokens, strategies,
 *   connections, web sessions, last-use times and the data key check, mirrored in memory on every node;
 *   every write is also republished on `<prefix>.records.<key>` (see kv-mirror.ts).
 * - `<prefix>_idempotency` (KV, ttl 24 h): in-flight markers and stored answers.
 * - `<prefix>_journal` (stream, subjects `<prefix>.journal.<user>`): the journal.
 *
 * The data key must be the same on every node (secrets are sealed by whichever node wrote
 * them); it is given explicitly (TRADEGATE_DATA_KEY), never generated per node, and checked
 * against the value the first node sealed into the records bucket.
 */
import { jetstream, jetstreamManager, RetentionPolicy, StorageType, JetStreamApiCodes, JetStreamApiError, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { Logger } from '../../log.js';
import { loadDataKey } from '../crypto.js';
import { IDEMPOTENCY_TTL_MS, JOURNAL } from '../../tuning.js';
import type { Store } from '../index.js';
import { checkDataKey, type KeyCheckSlot } from '../key-check.js';
import { createNatsIdempotencyStore, type NatsIdempotencyStore } from './idempotency.js';
import type { StoreDump } from '../dump.js';
import { importDump, type ImportReport } from './import.js';
import { createNatsJournal } from './journal.js';
import { createNatsSessionStore } from './sessions.js';
import { createDeviceTokens } from '../device-tokens.js';
import { createNatsGuardStore } from './guards.js';
import { isWrongRevision, KvMirror } from './kv-mirror.js';
import { whileStarting } from './startup.js';
import {
  createNatsApiKeyStore,
  createNatsConnectionStore,
  createNatsStrategyStore,
  createNatsUserStore,
  createNatsWebhookTokenStore,
} from './records.js';
import { fromBase64, toBase64, type NatsStoreContext } from './tables.js';

/** Options of openNatsStore. */
export interface NatsStoreOptions {
  /** An open connection; the store does not close it. */
  nc: NatsConnection;
  /** 64 hex chars, the same on every node. */
  dataKey: string;
  /** Names the buckets and the stream (default `tradegate`): one cluster per prefix. */
  prefix?: string;
  /** JetStream replicas of buckets and stream when they are created (1, or 3 on a 3-server NATS cluster). */
  replicas?: number;
  /** Local directory of this node (logs, nothing shared); reported as `dataDir`. */
  dataDir: string;
  clock?: () => number;
  logger?: Logger;
  /** In-flight marker lifetime (tests shorten it). */
  inFlightLeaseMs?: number;
  /** This node's name, written into its idempotency markers. */
  nodeId?: string;
  /** Whether the node a marker names still runs (see createNatsIdempotencyStore). */
  holderAlive?: (holder: string) => boolean;
  /** How long a marker of a node that stopped still holds its key (see createNatsIdempotencyStore). */
  deadHolderHoldMs?: number;
}

/** The cluster store: `Store` with the cluster-wide idempotency claim. */
export interface NatsStore extends Store {
  readonly idempotency: NatsIdempotencyStore;
  /** Writes a single-node store's rows into the cluster (`tradegate cluster import`; see import.ts). */
  importDump(dump: StoreDump): Promise<ImportReport>;
  /**
   * Resolves once the records in memory hold every write the bucket held when it was called (a
   * key revoked, a session ended while this node could not reach NATS): see KvMirror.current.
   */
  recordsCurrent(): Promise<void>;
}

const PREFIX = /^[A-Za-z0-9_-]{1,32}$/;
const KEY_CHECK = 'meta.keyCheck';

/** The KV side of the key check: one key in the records bucket, written with KV create. */
function keyCheckSlot(kv: KV, entry: KvEntry | null): KeyCheckSlot {
  const decode = (e: KvEntry | null): Uint8Array | undefined => (e?.operation === 'PUT' ? fromBase64(e.json<string>()) : undefined);
  let current = decode(entry);
  return {
    read: () => current,
    async writeOnce(sealed) {
      try {
        await kv.create(KEY_CHECK, JSON.stringify(toBase64(sealed)));
        return true;
      } catch (err) {
        if (!isWrongRevision(err)) throw err;
        current = decode(await kv.get(KEY_CHECK));
        return false;
      }
    },
  };
}

/** Settings of a bucket the cluster creates; `allowDirect: false` makes every read go to the stream leader. */
export interface BucketConfig {
  history: number;
  ttl: number;
  replicas: number;
  republishTo?: string;
  allowDirect?: boolean;
  /** Deadline of each call on the bucket (ms; the client's default otherwise). */
  timeout?: number;
}

/**
 * Opens a KV bucket, creating it with `config` when missing, and checks the settings that matter.
 * Retried while NATS cannot answer yet (whileStarting); a bucket with other settings is refused.
 */
export function openBucket(kvm: Kvm, name: string, config: BucketConfig, logger?: Logger): Promise<KV> {
  return whileStarting(`opening KV bucket ${name}`, () => createBucket(kvm, name, config), { logger });
}

/**
 * Opens a stream, creating it with `config` when it does not exist (an existing one keeps its
 * settings); retried while NATS cannot answer yet (whileStarting).
 */
export function ensureStream(jsm: JetStreamManager, config: Partial<StreamConfig> & { name: string }, logger?: Logger): Promise<void> {
  return whileStarting(`opening stream ${config.name}`, async () => {
    try {
      await jsm.streams.info(config.name);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound)) throw err;
      try {
        await jsm.streams.add(config);
      } catch (addErr) {
        // Another node created it between the look and the add (nats-server 2.9 then answers
        // "subjects overlap with an existing stream"; CI: two nodes starting a fresh cluster at once).
        const made = await jsm.streams.info(config.name).then(
          () => true,
          () => false,
        );
        if (!made) throw addErr;
      }
    }
  }, { logger });
}

async function createBucket(kvm: Kvm, name: string, config: BucketConfig, again = true): Promise<KV> {
  const republish = config.republishTo === undefined ? undefined : { src: `$KV.${name}.>`, dest: `${config.republishTo}.>` };
  let kv: KV;
  try {
    kv = await kvm.create(name, {
      history: config.history,
      ttl: config.ttl,
      replicas: config.replicas,
      storage: StorageType.File,
      ...(republish && { republish }),
      ...(config.allowDirect !== undefined && { allow_direct: config.allowDirect }),
      ...(config.timeout !== undefined && { timeout: config.timeout }),
    });
  } catch (err) {
    // Another node created it between the look and the add (as for streams, ensureStream): it is there now, opened the same way (re-probe: a node of two starting at once exited on it).
    if (again && err instanceof Error && /subjects overlap/i.test(err.message)) return createBucket(kvm, name, config, false);
    throw err;
  }
  const status = await kv.status();
  // An existing bucket keeps its own settings: a different TTL would silently change how long
  // idempotency records (or records at all) live, and without republishing the mirrors would
  // only see writes through their watches; such a bucket is refused rather than used.
  if (status.ttl !== config.ttl) throw new Error(`KV bucket ${name} has ttl ${status.ttl} ms, expected ${config.ttl} ms`);
  if (republish && status.republish.dest !== republish.dest) throw new Error(`KV bucket ${name} does not republish to ${republish.dest}`);
  return kv;
}

/** Opens (creating where needed) the cluster store over an open NATS connection. */
export async function openNatsStore(opts: NatsStoreOptions): Promise<NatsStore> {
  const prefix = opts.prefix ?? 'tradegate';
  if (!PREFIX.test(prefix)) throw new Error('NATS prefix must be 1..32 characters of A-Z a-z 0-9 _ -');
  const replicas = opts.replicas ?? 1;
  const clock = opts.clock ?? Date.now;
  const logger = opts.logger?.child({ component: 'nats-store' });
  const js = jetstream(opts.nc);
  const jsm = await whileStarting('reaching JetStream', () => jetstreamManager(opts.nc), { logger });
  const kvm = new Kvm(js);

  const republishTo = `${prefix}.records`;
  const records = await openBucket(kvm, `${prefix}_records`, { history: 1, ttl: 0, replicas, republishTo }, logger);
  const idempotencyKv = await openBucket(kvm, `${prefix}_idempotency`, { history: 1, ttl: IDEMPOTENCY_TTL_MS, replicas }, logger);
  const journalStream = `${prefix}_journal`;
  const subjectPrefix = `${prefix}.journal`;
  // The journal's limits (JOURNAL in tuning.ts), per user subject: the stream enforces them itself.
  const journalLimits = { max_age: JOURNAL.retentionMs * 1_000_000, max_msgs_per_subject: JOURNAL.maxEntriesPerUser };
  await ensureStream(jsm, { name: journalStream, subjects: [`${subjectPrefix}.>`], retention: RetentionPolicy.Limits, storage: StorageType.File, num_replicas: replicas, ...journalLimits }, logger);
  // A stream made before the limits existed gets them. Read with start-up's patience: on a cluster,
  // a stream another node has just created can be "not found" here for a moment (CI: a node exited
  // with "stream not found" at start).
  await whileStarting(
    `checking stream ${journalStream}`,
    async () => {
      const { config } = await jsm.streams.info(journalStream);
      if (config.max_age !== journalLimits.max_age || config.max_msgs_per_subject !== journalLimits.max_msgs_per_subject) await jsm.streams.update(journalStream, journalLimits);
    },
    { logger },
  );

  const sealer = await checkDataKey(keyCheckSlot(records, await records.get(KEY_CHECK)), () => loadDataKey(opts.dataDir, opts.dataKey), `the NATS records in ${prefix}_records`);
  const mirror = new KvMirror(records, `${prefix}_records`, { logger, republish: { nc: opts.nc, subject: republishTo } });
  const pending = new Set<Promise<unknown>>();
  let failed = 0;
  const ctx: NatsStoreContext = {
    mirror,
    sealer,
    clock,
    nowIso: () => new Date(clock()).toISOString(),
    logger,
    failedWrites: () => failed,
    track(write, what) {
      const p = write.catch((err: unknown) => {
        failed++;
        logger?.warn({ err }, `${what} failed`);
      });
      pending.add(p);
      void p.finally(() => pending.delete(p));
    },
  };
  // Indexes subscribe to the mirror before it loads, so they see every record.
  const sessions = createNatsSessionStore(ctx);
  // A new password ends every session of the user, whichever node changed it.
  const users = createNatsUserStore(ctx, { onPasswordChanged: (userId) => sessions.revokeAllForUser(userId) });
  const apiKeys = createNatsApiKeyStore(ctx);
  const connections = createNatsConnectionStore(ctx);
  const webhookTokens = createNatsWebhookTokenStore(ctx);
  const strategies = createNatsStrategyStore(ctx);
  await mirror.start();

  const flushed = async (): Promise<void> => {
    while (pending.size > 0) await Promise.all([...pending]);
  };
  let closing: Promise<void> | undefined;
  const journal = createNatsJournal(js, jsm, { stream: journalStream, subjectPrefix, clock, track: ctx.track });
  return {
    dataDir: opts.dataDir,
    users,
    apiKeys,
    connections,
    webhookTokens,
    strategies,
    sessions,
    idempotency: createNatsIdempotencyStore(idempotencyKv, { clock, logger, leaseMs: opts.inFlightLeaseMs, holder: opts.nodeId, holderAlive: opts.holderAlive, deadHolderHoldMs: opts.deadHolderHoldMs }),
    journal,
    importDump: (dump) => importDump(ctx, idempotencyKv, journal, flushed, dump),
    recordsCurrent: () => mirror.current(),
    guards: createNatsGuardStore(ctx),
    devices: createDeviceTokens(sealer, clock),
    flushed,
    close() {
      closing ??= (async () => {
        // Appends still waiting for NATS get one more try, not a minute of them.
        journal.stopRetries();
        await flushed();
        mirror.close();
      })();
      return closing;
    },
  };
}
