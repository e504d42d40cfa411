/**
 * `tradegate sim` as a process and the worker-thread host: both start the paper broker,
 * report its URLs, serve the protocol, and stop cleanly. Needs dist/ (npm test builds it).
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../../src/paths.js';
import { startSimInWorker } from '../../../src/sim/worker.js';
import { RawClient } from '../../support/sim.js';

it('runs standalone: prints REST, WebSocket and control URLs, creates the --demo user, stops on SIGTERM', async () => {
  const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin/tradegate.js'), 'sim', '--port', '0', '--demo', '--log-level', 'silent'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => out.includes('Stop with Ctrl-C') && resolve());
    child.once('exit', (code) => reject(new Error(`exited early (${code}): ${out}`)));
  });
  const rest = /REST\s+(http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(out)?.[1];
  const ws = /WebSocket\s+(ws:\/\/127\.0\.0\.1:\d+\/v1\/websocket)/.exec(out)?.[1];
  const control = /control\s+(http:\/\/127\.0\.0\.1:\d+\/control)/.exec(out)?.[1];
  expect(rest && ws && control).toBeTruthy();
  const login = await fetch(`${rest}/auth/accesstokenrequest`, { method: 'POST', body: JSON.stringify({ name: 'demo', password: 'demo' }) });
  const { accessToken } = (await login.json()) as { accessToken: string };
  const c = await RawClient.authorized(ws!, accessToken);
  const accounts = await c.request('account/list', '', undefined);
  expect(accounts.d.map((a: { name: string }) => a.name)).toEqual(['DEMO1', 'DEMO2']);
  c.close();
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  expect(await exited).toBe(0);
});

it('exits 1 with the reason when its port is taken, instead of hanging', async () => {
  const blocker = createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  try {
    const port = (blocker.address() as AddressInfo).port;
    const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin/tradegate.js'), 'sim', '--port', String(port), '--log-level', 'silent'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(1);
    expect(err).toMatch(/EADDRINUSE/);
  } finally {
    blocker.close();
  }
});

it('runs in a worker thread: startSimInWorker serves the protocol and close() ends the thread', async () => {
  const sim = await startSimInWorker({ priceStepMs: 0 });
  try {
    const res = await fetch(`${sim.controlUrl}/users`, { method: 'POST', body: JSON.stringify({ name: 'w', password: 'pw', accounts: [{ name: 'W1' }] }) });
    expect(res.status).toBe(201);
    const login = await fetch(`${sim.restUrl}/auth/accesstokenrequest`, { method: 'POST', body: JSON.stringify({ name: 'w', password: 'pw' }) });
    const { accessToken } = (await login.json()) as { accessToken: string };
    const c = await RawClient.authorized(sim.wsUrl, accessToken);
    expect((await c.request('account/list', '', undefined)).d).toHaveLength(1);
    c.close();
  } finally {
    await sim.close();
  }
  await expect(fetch(`${sim.controlUrl}/state`)).rejects.toThrow();
});

it('takes --sessions and the evaluation-rule flags: the demo accounts get the rules, a bad value exits 1', async () => {
  const child = spawn(process.execPath, [
    join(PACKAGE_ROOT, 'bin/tradegate.js'), 'sim', '--port', '0', '--demo', '--sessions', 'cme', '--daily-loss-limit', '500', '--trailing-drawdown=2000', '--log-level', 'silent',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', () => out.includes('Stop with Ctrl-C') && resolve());
    child.once('exit', (code) => reject(new Error(`exited early (${code}): ${out}`)));
  });
  expect(out).toMatch(/sessions\s+CME Globex hours/);
  expect(out).toMatch(/new accounts: daily loss limit 500, trailing drawdown 2000/);
  const control = /control\s+(http:\/\/127\.0\.0\.1:\d+\/control)/.exec(out)![1]!;
  const state = (await (await fetch(`${control}/state`)).json()) as { accounts: Array<{ dailyLossLimit: number; trailingDrawdown: number }>; session: { mode: string } };
  expect(state.session.mode).toBe('cme');
  expect(state.accounts.map((a) => [a.dailyLossLimit, a.trailingDrawdown])).toEqual([[500, 2000], [500, 2000]]);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  expect(await exited).toBe(0);

  const bad = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin/tradegate.js'), 'sim', '--sessions', 'weekly'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  bad.stderr.on('data', (d: Buffer) => (err += d.toString()));
  expect(await new Promise<number | null>((resolve) => bad.once('exit', resolve))).toBe(1);
  expect(err).toMatch(/--sessions must be cme or none/);
});
