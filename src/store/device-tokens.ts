/**
 * Device tokens: a browser that signed a user in gets one (a cookie), sealed with the data key,
 * so it stays valid across restarts and on every cluster node. A user name locked by failed
 * sign-ins from elsewhere still signs in from a browser holding one (OWASP's "device cookies"):
 * guessing cannot lock the owner out, from a new address or after a restart (attack probe).
 */
import type { Sealer } from './crypto.js';

const AAD = 'device-token';

export interface DeviceTokens {
  /** A token for a browser that just signed `userId` in, valid for `ttlMs`. */
  issue(userId: string, ttlMs: number): string;
  /** The user a token was issued for while it is valid; undefined for anything else. */
  holder(token: string): string | undefined;
}

export function createDeviceTokens(sealer: Sealer, clock: () => number = Date.now): DeviceTokens {
  return {
    issue(userId, ttlMs) {
      return sealer.seal(JSON.stringify({ u: userId, e: clock() + ttlMs }), AAD).toString('base64url');
    },
    holder(token) {
      // A sealed payload of a few dozen bytes: anything much longer is not one of ours.
      if (token.length > 256 || !/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
      try {
        const { u, e } = JSON.parse(sealer.open(Buffer.from(token, 'base64url'), AAD)) as { u?: unknown; e?: unknown };
        return typeof u === 'string' && typeof e === 'number' && e > clock() ? u : undefined;
      } catch {
        return undefined;
      }
    },
  };
}
