/** How an account is named on every page: "DEMO1 (10000002)". */
import type { Account } from './types';

export function accountLabel(accounts: readonly Account[] | undefined, id: string): string {
  const a = accounts?.find((x) => x.id === id);
  return a ? `${a.name} (${a.id})` : `Account ${id}`;
}
