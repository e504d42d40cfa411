/**
 * Users: a unique name and an optional scrypt password hash (for the web app's sign-in).
 * The hash never leaves this module.
 */
import { createHash } from 'node:crypto';
import { AppError } from '../domain/problems.js';
import { rowReader, type StoreContext } from './context.js';
import { dummyPasswordHash, hashPassword, randomBase62, verifyPasswordHash } from './crypto.js';

/** A user as the rest of the service sees it. */
export interface User {
  id: string;
  name: string;
  createdAt: string;
}

/** A user as stored (both stores). */
export interface UserRow extends User {
  passwordHash: string | null;
}

export const USER_NAME_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export interface UserStore {
  /** Creates a user; CONFLICT when the name is taken, VALIDATION_FAILED when it is malformed. */
  create(input: { name: string; password?: string }): Promise<User>;
  byId(id: string): User | undefined;
  /** The user of this name, in any case (names are unique regardless of case). */
  byName(name: string): User | undefined;
  /** Every user, oldest first. */
  list(): User[];
  /** The user when the password matches; null otherwise (also for unknown names and users without a password). The name may be in any case. */
  verifyPassword(name: string, password: string): Promise<User | null>;
  /** Sets or replaces a user's password and ends the user's sessions; NOT_FOUND for an unknown id. */
  setPassword(userId: string, password: string): Promise<void>;
  /** A tag of the user's current password (it changes with every password set); undefined without one. */
  passwordTag(userId: string): string | undefined;
}

/** What may be shown of a stored user. */
export function userView(row: UserRow): User {
  return { id: row.id, name: row.name, createdAt: row.createdAt };
}

/** VALIDATION_FAILED unless the password has 1..1024 characters and no NUL. */
export function checkPassword(password: string): void {
  if (password.length < 1 || password.length > 1024) throw new AppError('VALIDATION_FAILED', 'password must be 1..1024 characters');
  if (password.includes('\0')) throw new AppError('VALIDATION_FAILED', PASSWORD_NUL);
}

/**
 * scrypt keys its HMAC with the password padded with zero bytes: NULs at the end count for
 * nothing, so twelve NULs passed the length rule and signed in as an empty password, and `abc`
 * followed by nine NULs as `abc` (fuzz probe). No password holds one.
 */
export const PASSWORD_NUL = 'password must not contain NUL (U+0000)';

/** Shortest password a person sets (the web app's password change, `tradegate users add`). */
export const MIN_PASSWORD_LENGTH = 12;

/**
 * A taken name that differs from `name` only in case, if any. Names are unique regardless of case:
 * `Demo` beside `demo` would look like one user and share its sign-in lockout.
 */
export function sameNameIgnoringCase(names: Iterable<string>, name: string): string | undefined {
  const folded = name.toLowerCase();
  for (const taken of names) if (taken.toLowerCase() === folded) return taken;
  return undefined;
}

/** Validates a new user and builds its row (hashing the password, off the event loop). */
export async function newUserRow({ name, password }: { name: string; password?: string }, createdAt: string): Promise<UserRow> {
  if (!USER_NAME_PATTERN.test(name)) {
    throw new AppError('VALIDATION_FAILED', 'user name must be 1..64 characters of A-Z a-z 0-9 _ . -');
  }
  if (password !== undefined) checkPassword(password);
  const passwordHash = password === undefined ? null : await hashPassword(password);
  return { id: `usr_${randomBase62(12)}`, name, createdAt, passwordHash };
}

/** passwordTag of a stored user: a digest of the password's salted hash, which a new password (a new salt) changes. */
export function passwordTagOf(row: UserRow | undefined): string | undefined {
  return row?.passwordHash ? createHash('sha256').update(row.passwordHash).digest('base64url').slice(0, 22) : undefined;
}

/** Users oldest first (ties by name). */
export function sortUsers(users: User[]): User[] {
  return users.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.name < b.name ? -1 : 1));
}

/** The user when `row` exists, has a password and it matches. */
export async function passwordMatches(row: UserRow | undefined, password: string): Promise<User | null> {
  // Unknown users still cost one scrypt, so response time does not reveal which names exist.
  const ok = await verifyPasswordHash(password, row?.passwordHash ?? (await dummyPasswordHash()));
  // No password holds a NUL (checkPassword): one given would match the password without its trailing NULs.
  return ok && row?.passwordHash && !password.includes('\0') ? userView(row) : null;
}

/** The user store over a shared context; `onPasswordChanged` runs (awaited) after a password is replaced. */
export function createUserStore(ctx: StoreContext, hooks: { onPasswordChanged?: (userId: string) => Promise<unknown> } = {}): UserStore {
  const { users, userNames } = ctx.dbs;
  const row = rowReader<UserRow>(users);
  /** The id of the user named `name` in any case (attack probe: `DEMO` was refused the password of `demo`, whose name it could not take). */
  const idOf = (name: string): string | undefined => {
    const exact = userNames.get(name);
    if (exact !== undefined || !USER_NAME_PATTERN.test(name)) return exact;
    const same = sameNameIgnoringCase(userNames.getKeys() as Iterable<string>, name);
    return same === undefined ? undefined : userNames.get(same);
  };

  return {
    async create(input) {
      const rec = await newUserRow(input, ctx.nowIso());
      const { name } = rec;
      // The name check and both writes run in one write transaction, which LMDB serializes
      // across processes: two concurrent `users add demo` cannot both succeed.
      const taken = await ctx.durable(
        users.transaction(() => {
          const same = sameNameIgnoringCase(userNames.getKeys() as Iterable<string>, name);
          if (same !== undefined) return same;
          userNames.put(name, rec.id);
          users.put(rec.id, rec);
          return undefined;
        }),
      );
      if (taken !== undefined) throw new AppError('CONFLICT', `user '${taken}' already exists`);
      return userView(rec);
    },

    byId(id) {
      return ctx.cache.get(`user:${id}`, () => {
        const r = row(id);
        return r && userView(r);
      });
    },

    byName(name) {
      const id = idOf(name);
      const r = id === undefined ? undefined : row(id);
      return r && userView(r);
    },

    list() {
      const out: User[] = [];
      for (const { value } of users.getRange()) out.push(userView(value as UserRow));
      return sortUsers(out);
    },

    async verifyPassword(name, password) {
      const id = idOf(name);
      return passwordMatches(id === undefined ? undefined : row(id), password);
    },

    passwordTag: (userId) => passwordTagOf(row(userId)),

    async setPassword(userId, password) {
      checkPassword(password);
      const passwordHash = await hashPassword(password);
      const found = await ctx.durable(
        users.transaction(() => {
          const r = row(userId);
          if (!r) return false;
          users.put(userId, { ...r, passwordHash });
          return true;
        }),
      );
      if (!found) throw new AppError('NOT_FOUND', 'user not found');
      await hooks.onPasswordChanged?.(userId);
    },
  };
}
