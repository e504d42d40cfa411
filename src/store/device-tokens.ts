/**
 * Device tokens: a browser that signed a user in gets one (a cookie), sealed with the data key,
 * so it stays valid across restarts and on every cluster node. A user name locked by failed
 * sign-ins from elsewhere still signs in from a browser holding one (OWASP's "device cookies"):
 * guessing cannot lock the owner out, from a new address or after a restart (attack probe). A
 * token names the password it was issued under (the user's passwordTag): a new password ends
 * every device token of the old one (attack probe: a cookie kept from before a password change
 * still let its holder guess the new one past the name's lock).
 */
import type { Sealer } from './crypto.js';

const AAD = 'device-token';

/** Who a valid device token was issued to, and under which password. */
export interface DeviceHolder {
  userId: string;
  passwordTag: string;
}

export interface DeviceTokens {
  /** A token for a browser that just signed `userId` in (whose password has `passwordTag`), valid for `ttlMs`. */
  issue(userId: string, passwordTag: string, ttlMs: number): string;
  /** Its holder while the token is valid; undefined for anything else. */
  holder(token: string): DeviceHolder | undefined;
}

export function createDeviceTokens(sealer: Sealer, clock: () => number = Date.now): DeviceTokens {
  return {
    issue(userId, passwordTag, ttlMs) {
      return sealer.seal(JSON.stringify({ u: userId, p: passwordTag, e: clock() + ttlMs }), AAD).toString('base64url');
    },
    holder(token) {
      // A sealed payload of a few dozen bytes: anything much longer is not one of ours.
      if (token.length > 256 || !/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
      try {
        const { u, p, e } = JSON.parse(sealer.open(Buffer.from(token, 'base64url'), AAD)) as { u?: unknown; p?: unknown; e?: unknown };
        return typeof u === 'string' && typeof p === 'string' && typeof e === 'number' && e > clock() ? { userId: u, passwordTag: p } : undefined;
      } catch {
        return undefined;
      }
    },
  };
}
