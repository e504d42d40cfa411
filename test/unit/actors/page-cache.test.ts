import { expect, test } from 'vitest';
import { MAX_PAGES_PER_CONNECTION, WorkingOrdersCache } from '../../../src/actors/page-cache.js';

const page = (version: number | undefined, json = '[]') => ({ json, total: 0, version });

test('a page is kept per connection, account, offset and limit under the ticket it was asked with', () => {
  const cache = new WorkingOrdersCache();
  const ticket = cache.ticket('c1');
  const p = page(3);
  cache.keep('c1', ticket, 'a1', 0, 100, p);
  expect(cache.get('c1', 'a1', 0, 100)).toBe(p);
  expect(cache.get('c1', 'a1', 0, 50)).toBeUndefined();
  expect(cache.get('c1', 'a2', 0, 100)).toBeUndefined();
  expect(cache.get('c2', 'a1', 0, 100)).toBeUndefined();
});

test('an answer whose connection was reset after it was asked for is not kept (status, accounts, actor restart)', () => {
  const cache = new WorkingOrdersCache();
  const before = cache.ticket('c1');
  cache.reset('c1');
  cache.keep('c1', before, 'a1', 0, 100, page(3));
  expect(cache.get('c1', 'a1', 0, 100)).toBeUndefined();
  // Asked again after the reset: kept.
  const after = cache.ticket('c1');
  cache.keep('c1', after, 'a1', 0, 100, page(3));
  expect(cache.get('c1', 'a1', 0, 100)).toBeDefined();
  cache.reset('c1');
  expect(cache.get('c1', 'a1', 0, 100)).toBeUndefined();
});

test('a change notice drops older pages, and an answer older than a notice that came first is never kept', () => {
  const cache = new WorkingOrdersCache();
  const ticket = cache.ticket('c1');
  cache.keep('c1', ticket, 'a1', 0, 100, page(3));
  cache.keep('c1', ticket, 'a1', 0, 10, page(5));
  cache.changed('c1', 5);
  expect(cache.get('c1', 'a1', 0, 100)).toBeUndefined();
  expect(cache.get('c1', 'a1', 0, 10)).toBeDefined();
  // The answer was served at 4, the notice of 5 overtook it.
  cache.keep('c1', ticket, 'a2', 0, 100, page(4));
  expect(cache.get('c1', 'a2', 0, 100)).toBeUndefined();
  // An older notice arriving late changes nothing.
  cache.changed('c1', 2);
  expect(cache.get('c1', 'a1', 0, 10)).toBeDefined();
  // A page without a version (a gateway that does not version) is never kept.
  cache.keep('c1', ticket, 'a3', 0, 100, page(undefined));
  expect(cache.get('c1', 'a3', 0, 100)).toBeUndefined();
});

test('notices for a connection nobody asked about are ignored; the pages per connection are bounded', () => {
  const cache = new WorkingOrdersCache();
  cache.changed('c9', 7);
  const ticket = cache.ticket('c9');
  cache.keep('c9', ticket, 'a1', 0, 100, page(1));
  expect(cache.get('c9', 'a1', 0, 100)).toBeDefined();
  for (let i = 0; i < MAX_PAGES_PER_CONNECTION; i++) cache.keep('c9', ticket, 'a1', i + 1, 100, page(1));
  let kept = 0;
  for (let i = 0; i <= MAX_PAGES_PER_CONNECTION; i++) if (cache.get('c9', 'a1', i, 100)) kept++;
  expect(kept).toBeLessThanOrEqual(MAX_PAGES_PER_CONNECTION);
  expect(cache.get('c9', 'a1', MAX_PAGES_PER_CONNECTION, 100)).toBeDefined();
});
