/**
 * Web-app sign-in: `POST/GET/DELETE /session` and `POST /me/password`. A sign-in always
 * starts a new session id (a cookie planted before sign-in is revoked, never promoted), and
 * a password change ends every session of the user before this browser gets a fresh one.
 */
import { z } from 'zod';
import { AppError } from '../../domain/problems.js';
import type { SessionRecord, User } from '../../store/index.js';
import { assertSameOrigin, csrfTokenFor, DEVICE_COOKIE_MS } from '../session-auth.js';
import { defineRoute, type RouteContext, type RouteDef, type RouteResponse } from '../route-types.js';
import { errors, type RouteDeps, webSessions } from './common.js';
import { MIN_PASSWORD_LENGTH } from '../../store/users.js';

const signInBodySchema = z.strictObject({
  name: z.string().min(1).max(64),
  password: z.string().min(1).max(1024),
});

/** Shortest password the web app accepts when a user changes theirs. */
export { MIN_PASSWORD_LENGTH };
/** Sessions a user keeps at once (devices and browsers); a sign-in past it ends the least recently used. */
export const SESSIONS_PER_USER = 20;

const changePasswordBodySchema = z.strictObject({
  currentPassword: z.string().min(1).max(1024),
  newPassword: z.string().min(MIN_PASSWORD_LENGTH, `must be at least ${MIN_PASSWORD_LENGTH} characters`).max(1024).refine((p) => !p.includes('\0'), 'must not contain NUL (U+0000)'),
});

/** What the page learns about its session (never the session id: that stays in the HttpOnly cookie). */
export const sessionSchema = z.object({
  user: z.object({ id: z.string(), name: z.string() }),
  csrfToken: z.string().describe('Send it as X-CSRF-Token on every write made with this session'),
  expiresAt: z.string().describe('Absolute end of the session (ISO-8601)'),
  idleTimeoutSeconds: z.number().describe('The session also ends after this long without a request'),
});

function sessionBody(user: Pick<User, 'id' | 'name'>, secret: string, record: SessionRecord) {
  return {
    user: { id: user.id, name: user.name },
    csrfToken: csrfTokenFor(secret),
    expiresAt: new Date(record.expiresAt).toISOString(),
    idleTimeoutSeconds: Math.round(record.idleMs / 1000),
  };
}

const NO_STORE = { 'Cache-Control': 'no-store' };
/** The second Set-Cookie of a sign-in (the device cookie), under a key of another case. */
const DEVICE_SET_COOKIE = 'set-cookie';

/** Session routes. */
export function sessionRoutes(deps: RouteDeps): RouteDef<any, any>[] {
  // Resolved per request: building the route table reads no dependency.
  const web = () => webSessions(deps);

  /** A new session for `user` in this browser, replacing whatever cookie it sent. */
  async function startSession(ctx: RouteContext<unknown, unknown>, user: User, status: number, kind: string): Promise<RouteResponse> {
    const old = web().secretOf(ctx.req.headers);
    if (old) await deps.store.sessions.revoke(old);
    const { secret, record } = await deps.store.sessions.create(user.id, web().policy);
    // Sessions are bounded per user: signing in again and again cannot pile them up (or their streams).
    for (const id of await deps.store.sessions.keepNewest(user.id, SESSIONS_PER_USER)) {
      deps.streams?.closeStreams({ principalId: `session:${id}` }, 'session-ended');
    }
    deps.store.journal.append({ userId: user.id, accountId: null, kind, request: { via: 'session', ip: ctx.req.ip, requestId: ctx.requestId }, outcome: { sessionId: record.id } });
    const passwordTag = deps.store.users.passwordTag(user.id);
    const device = passwordTag === undefined ? undefined : deps.store.devices.issue(user.id, passwordTag, DEVICE_COOKIE_MS);
    // Two cookies: header names are case-insensitive, and two keys write two Set-Cookie lines.
    const cookies = { 'Set-Cookie': web().cookie(secret, ctx.req.headers), ...(device !== undefined && { [DEVICE_SET_COOKIE]: web().deviceCookie(device, ctx.req.headers) }) };
    return { status, headers: { ...NO_STORE, ...cookies }, body: sessionBody(user, secret, record) };
  }

  /** The request's device cookie when it was issued to the user named `name` under their current password. */
  function trustedDevice(ctx: RouteContext<unknown, unknown>, name: string): string | undefined {
    const token = web().deviceOf(ctx.req.headers);
    const holder = token ? deps.store.devices.holder(token) : undefined;
    const user = holder && deps.store.users.byName(name);
    return user && holder.userId === user.id && holder.passwordTag === deps.store.users.passwordTag(user.id) ? token : undefined;
  }

  /** The signed-in user and their live session (the engine already checked the cookie). */
  function current(ctx: RouteContext<unknown, unknown>): { user: User; secret: string; record: SessionRecord } {
    const secret = web().secretOf(ctx.req.headers);
    const record = secret ? deps.store.sessions.lookup(secret) : undefined;
    const user = record ? deps.store.users.byId(record.userId) : undefined;
    if (!secret || !record || !user) throw new AppError('UNAUTHENTICATED', 'Sign in first: no valid session');
    return { user, secret, record };
  }

  const signIn = defineRoute<z.output<typeof signInBodySchema>>({
    method: 'POST',
    path: '/session',
    scope: 'none',
    operationId: 'signIn',
    summary: 'Sign in to the web app with a user name and password',
    description:
      'Sets the HttpOnly session cookie (always a new session id) and returns the CSRF token the page sends on writes. ' +
      'Failed sign-ins are limited per address and per user name (429 with Retry-After).',
    tags: ['session'],
    body: signInBodySchema,
    responses: [
      { status: 200, description: 'Signed in; `Set-Cookie` carries the session', schema: sessionSchema },
      ...errors('VALIDATION_FAILED', 'UNAUTHENTICATED', 'CSRF_REJECTED', 'RATE_LIMITED'),
    ],
    async handler(ctx) {
      assertSameOrigin(ctx.req.headers, web().baseUrl);
      const { name, password } = ctx.req.body;
      const user = await web().throttle.attempt(ctx.req.ip, name, () => deps.store.users.verifyPassword(name, password), trustedDevice(ctx as RouteContext<unknown, unknown>, name));
      if (!user) {
        ctx.log.warn({ ip: ctx.req.ip }, 'sign-in failed');
        throw new AppError('UNAUTHENTICATED', 'Incorrect user name or password');
      }
      return startSession(ctx as RouteContext<unknown, unknown>, user, 200, 'sign-in');
    },
  });

  const get = defineRoute({
    method: 'GET',
    path: '/session',
    scope: 'session',
    operationId: 'getSession',
    summary: 'The signed-in user and the CSRF token (the page calls it on load)',
    tags: ['session'],
    responses: [{ status: 200, description: 'The session', schema: sessionSchema }, ...errors('UNAUTHENTICATED', 'SESSION_REQUIRED')],
    async handler(ctx) {
      const { user, secret, record } = current(ctx);
      return { status: 200, headers: NO_STORE, body: sessionBody(user, secret, record) };
    },
  });

  const signOut = defineRoute({
    method: 'DELETE',
    path: '/session',
    scope: 'session',
    operationId: 'signOut',
    summary: 'Sign out: the session ends on the server and the cookie is cleared',
    tags: ['session'],
    responses: [{ status: 204, description: 'Signed out' }, ...errors('UNAUTHENTICATED', 'CSRF_REJECTED', 'SESSION_REQUIRED')],
    async handler(ctx) {
      const secret = web().secretOf(ctx.req.headers);
      if (secret) await deps.store.sessions.revoke(secret);
      deps.streams?.closeStreams({ principalId: ctx.auth.principalId }, 'session-ended');
      deps.store.journal.append({ userId: ctx.auth.userId, accountId: null, kind: 'sign-out', request: { via: 'session', requestId: ctx.requestId }, outcome: { sessionId: ctx.auth.principalId } });
      return { status: 204, headers: { 'Set-Cookie': web().clearCookie(ctx.req.headers) } };
    },
  });

  const changePassword = defineRoute<z.output<typeof changePasswordBodySchema>>({
    method: 'POST',
    path: '/me/password',
    scope: 'session',
    operationId: 'changePassword',
    summary: 'Change your password; every session of yours ends and this browser gets a new one',
    description: `The new password needs at least ${MIN_PASSWORD_LENGTH} characters. A wrong current password counts as a failed sign-in.`,
    tags: ['session'],
    body: changePasswordBodySchema,
    responses: [
      { status: 200, description: 'Changed; `Set-Cookie` carries the new session', schema: sessionSchema },
      ...errors('VALIDATION_FAILED', 'UNAUTHENTICATED', 'CSRF_REJECTED', 'SESSION_REQUIRED', 'RATE_LIMITED'),
    ],
    async handler(ctx) {
      const { user } = current(ctx as RouteContext<unknown, unknown>);
      const { currentPassword, newPassword } = ctx.req.body;
      const wrong = (path: string, message: string) => new AppError('VALIDATION_FAILED', `${path}: ${message}`, { errors: [{ path, message }] });
      if (newPassword === currentPassword) throw wrong('newPassword', 'must differ from the current password');
      const ok = await web().throttle.attempt(ctx.req.ip, user.name, () => deps.store.users.verifyPassword(user.name, currentPassword));
      if (!ok) throw wrong('currentPassword', 'is not your current password');
      await deps.store.users.setPassword(user.id, newPassword);
      // Every session of the user ended with the change: so do the health streams they opened.
      deps.streams?.closeStreams({ userId: user.id, sessionsOnly: true }, 'password-changed');
      return startSession(ctx as RouteContext<unknown, unknown>, user, 200, 'password-change');
    },
  });

  return [signIn, get, signOut, changePassword];
}
