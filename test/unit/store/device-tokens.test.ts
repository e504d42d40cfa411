import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import { createSealer } from '../../../src/store/crypto.js';
import { createDeviceTokens } from '../../../src/store/device-tokens.js';

it('a device token names its user and password until it expires, under the same data key only (so it outlives a restart and holds on every node); tampered or foreign tokens name nobody', () => {
  let now = 1_000_000;
  const key = randomBytes(32);
  const tokens = createDeviceTokens(createSealer(key), () => now);
  const token = tokens.issue('usr_1', 'tag-1', 60_000);
  const holder = { userId: 'usr_1', passwordTag: 'tag-1' };
  expect(tokens.holder(token)).toEqual(holder);
  // Another process with the same data key (a restart, another cluster node).
  expect(createDeviceTokens(createSealer(Buffer.from(key)), () => now).holder(token)).toEqual(holder);
  expect(createDeviceTokens(createSealer(randomBytes(32)), () => now).holder(token)).toBeUndefined();
  const flipped = `${token.slice(0, 10)}${token[10] === 'A' ? 'B' : 'A'}${token.slice(11)}`;
  expect(tokens.holder(flipped)).toBeUndefined();
  expect(tokens.holder('not a token')).toBeUndefined();
  expect(tokens.holder('A'.repeat(300))).toBeUndefined();
  now += 60_001;
  expect(tokens.holder(token)).toBeUndefined();
});
