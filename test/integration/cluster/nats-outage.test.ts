/**
 * A short outage of the only NATS server (SIGKILL, then the same server started again on its
 * storage): a `serve --cluster` node keeps its actors through it (its lease holds 5 s from its
 * last acknowledged renewal, and it renews on the new connection as soon as the client
 * reconnects), and meanwhile says it cannot serve: /readyz 503 and RECONNECTING on its health
 * streams, then ready and CONNECTED again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CUT_OFF_DETAIL, REACHED_AGAIN_DETAIL } from '../../../src/http/reach-notices.js';
import { addClusterUser, connectedOn, openClusterRecords, startClusterNode, type ClusterNodeProcess, type ClusterUser } from '../../support/cluster.js';
import { http } from '../../support/http.js';
import { startNats, type NatsServer } from '../../support/nats.js';
import { startSimProcess, type SimProcess } from '../../support/processes.js';
import { openHealthStream } from '../../support/sse.js';

let nats: NatsServer & { stopAndRemove(): Promise<void> };
let sim: SimProcess;
let node: ClusterNodeProcess;
let ann: ClusterUser;

beforeAll(async () => {
  nats = await startNats();
  sim = await startSimProcess();
  const records = await openClusterRecords([nats.url]);
  ann = await addClusterUser(records.store, sim, 'ann');
  await records.close();
  node = await startClusterNode([nats.url], 'solo');
  await connectedOn(node.url, ann.apiKey, 30_000);
}, 120_000);

afterAll(async () => {
  await node?.stop();
  await sim?.stop();
  await nats?.stopAndRemove();
});

describe('the NATS server dies and comes back within 3.5 s', () => {
  it('the node keeps its actors, says it is cut off meanwhile (readyz 503, RECONNECTING), then ready and CONNECTED again', { timeout: 90_000 }, async () => {
    const stream = await openHealthStream(node.url, ann.apiKey);
    await stream.waitFor((e) => e.type === 'snapshot' && e.status === 'CONNECTED', 0, 5000);
    const from = node.logs().length;
    const killedAt = Date.now();
    await nats.stop('SIGKILL');
    const cut = await stream.waitFor((e) => e.detail === CUT_OFF_DETAIL, 0, 3500);
    expect(cut.event).toMatchObject({ type: 'status', connectionId: ann.connectionId, status: 'RECONNECTING', reason: 'disconnect' });
    expect((await http(node.url, 'GET', '/readyz')).json).toMatchObject({ status: 503, code: 'CLUSTER_UNAVAILABLE' });
    await new Promise((r) => setTimeout(r, Math.max(0, 3500 - (Date.now() - killedAt))));
    await nats.restart();
    const back = await stream.waitFor((e) => e.detail === REACHED_AGAIN_DETAIL, cut.index + 1, 5000);
    expect(back.event).toMatchObject({ type: 'status', connectionId: ann.connectionId, status: 'CONNECTED', reason: 'reconnect' });
    expect((await http(node.url, 'GET', '/readyz')).status).toBe(200);
    const logs = node.logs().slice(from);
    console.info(`NATS killed at +0; said so at +${cut.event.ts - killedAt} ms; NATS back and the node ready by +${back.event.ts - killedAt} ms`);
    // Never lapsed, so the actor ran on: no other status of the connection came through.
    expect(logs.filter((l) => l.msg.startsWith('lease lapsed'))).toEqual([]);
    expect(stream.events.filter((e) => e.type === 'status' && e.detail !== CUT_OFF_DETAIL && e.detail !== REACHED_AGAIN_DETAIL)).toEqual([]);
    // And it trades again.
    const order = await http(node.url, 'POST', `/api/v1/accounts/${ann.accounts[0]}/orders`, {
      key: ann.apiKey,
      body: { symbol: 'ES1!', side: 'buy', qty: 1, type: 'market' },
    });
    expect(order.status, order.text).toBe(201);
    stream.close();
  });
});
