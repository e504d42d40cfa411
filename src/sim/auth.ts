/**
 * Access tokens of the paper broker: sessions with an expiry (renewal extends the session
 * and adds a token to it), at most N concurrent sessions per user (the oldest is revoked),
 * penalty tickets (`p-ticket`) and the user-level request limit.
 */
import { randomBytes } from 'node:crypto';
import type { SimUser } from './state.js';

/** One login: every token issued or renewed in it shares its expiry. */
export interface AuthSession {
  id: number;
  userId: number;
  expiresAt: number;
  revoked: boolean;
}

/** Result of looking a token up. */
export type TokenCheck = { ok: true; session: AuthSession } | { ok: false; reason: 'invalid' | 'expired' };

/** Auth options (all times in ms). */
export interface AuthOptions {
  clock: () => number;
  tokenLifetimeMs: number;
  maxSessionsPerUser: number;
  requestsPerSecond: number;
  requestsPerHour: number;
}

interface Window {
  secondStart: number;
  second: number;
  hourStart: number;
  hour: number;
}

interface Ticket {
  notBefore: number;
  captcha: boolean;
}

/** Sessions, tokens, p-tickets and request counters. */
export class Auth {
  private readonly tokens = new Map<string, AuthSession>();
  private readonly sessions = new Map<number, AuthSession[]>();
  private readonly windows = new Map<number, Window>();
  private readonly tickets = new Map<string, Ticket>();
  private nextSession = 1;

  constructor(private readonly opts: AuthOptions) {}

  /** Starts a session (revoking the oldest beyond the limit) and returns the token response. */
  login(user: SimUser): Record<string, unknown> {
    const session: AuthSession = { id: this.nextSession++, userId: user.id, expiresAt: this.opts.clock() + this.opts.tokenLifetimeMs, revoked: false };
    const list = (this.sessions.get(user.id) ?? []).filter((s) => !s.revoked);
    list.push(session);
    while (list.length > this.opts.maxSessionsPerUser) list.shift()!.revoked = true;
    this.sessions.set(user.id, list);
    return this.tokenResponse(session, user);
  }

  /** Extends the session of a valid token and returns a fresh token for it. */
  renew(session: AuthSession, user: SimUser): Record<string, unknown> {
    session.expiresAt = this.opts.clock() + this.opts.tokenLifetimeMs;
    return this.tokenResponse(session, user);
  }

  /** Looks a token up; expired and revoked tokens are refused. */
  check(token: string): TokenCheck {
    const session = this.tokens.get(token);
    if (!session) return { ok: false, reason: 'invalid' };
    return this.valid(session) ? { ok: true, session } : { ok: false, reason: 'expired' };
  }

  /** True while the session is neither revoked nor past its expiry. */
  valid(session: AuthSession): boolean {
    return !session.revoked && session.expiresAt > this.opts.clock();
  }

  /** Expires every session (of one user, when given) now; returns how many. */
  expire(userId?: number): number {
    let n = 0;
    const now = this.opts.clock();
    for (const [uid, list] of this.sessions) {
      if (userId !== undefined && uid !== userId) continue;
      for (const s of list) if (s.expiresAt > now) {
        s.expiresAt = now;
        n++;
      }
    }
    return n;
  }

  /** Revokes every session of a user (its login was removed): its tokens are refused from now on. */
  revoke(userId: number): void {
    for (const s of this.sessions.get(userId) ?? []) s.revoked = true;
    this.sessions.delete(userId);
  }

  /** Counts one request; false when the user-level limit is exceeded. */
  allow(userId: number): boolean {
    const now = this.opts.clock();
    let w = this.windows.get(userId);
    if (!w) {
      w = { secondStart: now, second: 0, hourStart: now, hour: 0 };
      this.windows.set(userId, w);
    }
    if (now - w.secondStart >= 1000) {
      w.secondStart = now;
      w.second = 0;
    }
    if (now - w.hourStart >= 3_600_000) {
      w.hourStart = now;
      w.hour = 0;
    }
    w.second++;
    w.hour++;
    return w.second <= this.opts.requestsPerSecond && w.hour <= this.opts.requestsPerHour;
  }

  /** Issues a penalty ticket: the request was not executed; resend with it after `p-time`. */
  issueTicket(seconds: number, captcha: boolean): Record<string, unknown> {
    const ticket = randomBytes(18).toString('base64url');
    this.tickets.set(ticket, { notBefore: this.opts.clock() + seconds * 1000, captcha });
    return { 'p-ticket': ticket, 'p-time': seconds, 'p-captcha': captcha };
  }

  /**
   * Checks a ticket sent back in a body: undefined = accepted (consumed), otherwise the
   * penalty answer to send again (too early, or a captcha ticket a program cannot solve).
   */
  redeemTicket(ticket: string): Record<string, unknown> | undefined {
    const t = this.tickets.get(ticket);
    if (!t) return undefined;
    const left = Math.ceil((t.notBefore - this.opts.clock()) / 1000);
    if (t.captcha || left > 0) return { 'p-ticket': ticket, 'p-time': Math.max(left, 1), 'p-captcha': t.captcha };
    this.tickets.delete(ticket);
    return undefined;
  }

  private tokenResponse(session: AuthSession, user: SimUser): Record<string, unknown> {
    const accessToken = randomBytes(32).toString('base64url');
    const mdAccessToken = randomBytes(32).toString('base64url');
    this.tokens.set(accessToken, session);
    this.tokens.set(mdAccessToken, session);
    return {
      accessToken, mdAccessToken, expirationTime: new Date(session.expiresAt).toISOString(),
      passwordExpirationTime: new Date(this.opts.clock() + 365 * 86_400_000).toISOString(), userStatus: 'Active',
      userId: user.id, name: user.name, hasLive: false,
    };
  }
}
