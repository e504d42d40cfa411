/** Contracts as the service resolves them today, for tests that price or look up the front month. */
import { resolveSymbol, type ResolvedContract } from '../../src/domain/symbols.js';

/** The front-month contract of a root now (throws if the root does not resolve). */
export function frontOf(root: string): ResolvedContract {
  const r = resolveSymbol(root, new Date());
  if (!r.ok) throw new Error(r.reason);
  return r;
}
