import { describe, expect, it } from 'vitest';
import { Mirror } from '../../../../src/broker/tradovate/mirror.js';
import { Exposure, latestPositions } from '../../../../workers/connection-actor/exposure.js';

const A = 7;
const C = 1;
let nextId = 1000;

function setup(snapshot: Record<string, unknown[]> = {}) {
  const mirror = new Mirror();
  const exposure = new Exposure(mirror);
  mirror.replace({ accounts: [{ id: A, name: 'A', active: true }], contracts: [{ id: C, name: 'ESZ6' }], ...snapshot });
  const order = (action: 'Buy' | 'Sell', qty: number, extra: Record<string, unknown> = {}) => {
    const id = nextId++;
    mirror.apply('order', 'Created', { id, accountId: A, contractId: C, action, ordStatus: 'Working', ...extra });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id, orderQty: qty, orderType: 'Limit' });
    return id;
  };
  const fill = (orderId: number, qty: number, action: 'Buy' | 'Sell') => mirror.apply('fill', 'Created', { id: nextId++, orderId, contractId: C, action, qty, price: 5000 });
  const status = (orderId: number, ordStatus: string) => mirror.apply('order', 'Updated', { ...mirror.get('order', orderId)!, ordStatus });
  const now = () => exposure.contract(String(A), C);
  return { mirror, exposure, order, fill, status, now };
}

describe('Exposure', () => {
  it('starts from the snapshot: reported positions and live orders (final ones ignored)', () => {
    const { now, exposure } = setup({
      positions: [{ id: 1, accountId: A, contractId: C, netPos: 2 }],
      orders: [
        { id: 2, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Working' },
        { id: 3, accountId: A, contractId: C, action: 'Sell', ordStatus: 'Canceled' },
      ],
      orderVersions: [{ id: 4, orderId: 2, orderQty: 3 }, { id: 5, orderId: 3, orderQty: 9 }],
    });
    expect(now()).toEqual({ net: 2, buying: 3, selling: 0 });
    expect(exposure.total(String(A))).toBe(5);
    expect(exposure.contractId('ESZ6')).toBe(C);
  });

  it('a fill moves its quantity from working to the position in the same event, even after the status said Filled', () => {
    const { order, fill, status, now } = setup();
    const id = order('Buy', 3);
    status(id, 'Filled');
    // The status came first: the quantity still counts until the fills arrive.
    expect(now()).toEqual({ net: 0, buying: 3, selling: 0 });
    fill(id, 2, 'Buy');
    expect(now()).toEqual({ net: 2, buying: 1, selling: 0 });
    fill(id, 1, 'Buy');
    expect(now()).toEqual({ net: 3, buying: 0, selling: 0 });
  });

  it('a one-cancels-other pair counts once; suspended bracket legs count from their activation', () => {
    const { mirror, order, fill, status, now } = setup();
    const entry = order('Buy', 2);
    const tp = order('Sell', 2, { parentId: entry, ordStatus: 'Suspended' });
    const sl = order('Sell', 2, { parentId: entry, ordStatus: 'Suspended' });
    mirror.apply('order', 'Updated', { ...mirror.get('order', tp)!, ocoId: sl });
    mirror.apply('order', 'Updated', { ...mirror.get('order', sl)!, ocoId: tp });
    expect(now()).toEqual({ net: 0, buying: 2, selling: 0 });
    fill(entry, 2, 'Buy');
    status(entry, 'Filled');
    status(tp, 'Working');
    status(sl, 'Working');
    expect(now()).toEqual({ net: 2, buying: 0, selling: 2 });
    fill(tp, 2, 'Sell');
    status(tp, 'Filled');
    status(sl, 'Canceled');
    expect(now()).toEqual({ net: 0, buying: 0, selling: 0 });
  });

  it('legs of one entry without ocoId are one group through their parent', () => {
    const { order, now } = setup();
    const entry = order('Buy', 1);
    order('Sell', 1, { parentId: entry });
    order('Sell', 1, { parentId: entry });
    expect(now()).toEqual({ net: 0, buying: 1, selling: 1 });
  });

  it('a hold counts until the broker reports the order’s quantity, then the order counts instead', () => {
    const { mirror, exposure, now } = setup();
    const hold = exposure.hold(String(A), C, 'buy', 2);
    expect(now().buying).toBe(2);
    const id = nextId++;
    hold.bind(id);
    mirror.apply('order', 'Created', { id, accountId: A, contractId: C, action: 'Buy', ordStatus: 'PendingNew' });
    expect(now().buying).toBe(2);
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id, orderQty: 2 });
    expect(now().buying).toBe(2);
    hold.release();
    expect(now().buying).toBe(2);
  });

  it('a hold bound to an order already reported ends at once; release is idempotent; a rejected order ends it too', () => {
    const { mirror, exposure, order, status, now } = setup();
    const id = order('Sell', 1);
    const hold = exposure.hold(String(A), C, 'sell', 1);
    expect(now().selling).toBe(2);
    hold.bind(id);
    expect(now().selling).toBe(1);
    hold.release();
    expect(now().selling).toBe(1);
    const other = exposure.hold(String(A), C, 'buy', 4);
    const rejected = nextId++;
    other.bind(rejected);
    mirror.apply('order', 'Created', { id: rejected, accountId: A, contractId: C, action: 'Buy', ordStatus: 'PendingNew' });
    expect(now().buying).toBe(4);
    status(rejected, 'Rejected');
    expect(now().buying).toBe(0);
  });

  it('a fill that arrives before its order is counted when the order shows up', () => {
    const { mirror, now } = setup();
    const id = nextId++;
    mirror.apply('fill', 'Created', { id: nextId++, orderId: id, contractId: C, action: 'Sell', qty: 1, price: 5000 });
    expect(now().net).toBe(0);
    mirror.apply('order', 'Created', { id, accountId: A, contractId: C, action: 'Sell', ordStatus: 'Filled' });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id, orderQty: 1 });
    expect(now()).toEqual({ net: -1, buying: 0, selling: 0 });
  });

  it('events replayed over a new snapshot are not counted twice; holds survive the resync', () => {
    const { mirror, exposure, now } = setup();
    const hold = exposure.hold(String(A), C, 'buy', 1);
    mirror.expectSnapshot();
    // A fill pushed before the snapshot answer; the snapshot already contains it.
    mirror.apply('order', 'Created', { id: 50, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Filled' });
    mirror.apply('fill', 'Created', { id: 51, orderId: 50, contractId: C, action: 'Buy', qty: 2, price: 5000 });
    mirror.replace({
      accounts: [{ id: A, name: 'A' }],
      contracts: [{ id: C, name: 'ESZ6' }],
      positions: [{ id: 52, accountId: A, contractId: C, netPos: 2 }],
      orders: [{ id: 50, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Filled' }],
      orderVersions: [{ id: 53, orderId: 50, orderQty: 2 }],
      fills: [{ id: 51, orderId: 50, contractId: C, action: 'Buy', qty: 2, price: 5000 }],
    });
    expect(now()).toEqual({ net: 2, buying: 1, selling: 0 });
    hold.release();
    expect(exposure.total(String(A))).toBe(2);
  });

  it('the account total follows every contract', () => {
    const { mirror, exposure, order } = setup();
    mirror.put('contract', { id: 2, name: 'NQZ6' });
    order('Buy', 2);
    mirror.apply('order', 'Created', { id: 77, accountId: A, contractId: 2, action: 'Sell', ordStatus: 'Working' });
    mirror.apply('orderVersion', 'Created', { id: 78, orderId: 77, orderQty: 3 });
    expect(exposure.total(String(A))).toBe(5);
    expect(exposure.contracts(String(A)).map((c) => c.contractId).sort()).toEqual([1, 2]);
    mirror.apply('order', 'Deleted', { id: 77 });
    expect(exposure.total(String(A))).toBe(2);
  });

  it('a broker that keeps one position per trade date counts only the newest, per account and contract', () => {
    const positions = [
      { id: 9, accountId: A, contractId: C, netPos: 3 },
      { id: 4, accountId: A, contractId: C, netPos: 1 },
      { id: 5, accountId: 8, contractId: C, netPos: -2 },
      { id: 6, accountId: A, contractId: 2, netPos: 1 },
    ];
    for (const order of [positions, [...positions].reverse()]) {
      const { mirror, now } = setup({ positions: order });
      expect(now().net).toBe(3);
      expect(latestPositions(mirror).map((p) => p.id).sort()).toEqual([5, 6, 9]);
    }
  });

  it('lists only contracts with something in them; an unknown account has none', () => {
    const { exposure, order, status } = setup();
    expect(exposure.contracts('nobody')).toEqual([]);
    const id = order('Sell', 2);
    expect(exposure.contracts(String(A))).toEqual([{ contractId: C, exposure: { net: 0, buying: 0, selling: 2 } }]);
    status(id, 'Canceled');
    expect(exposure.contracts(String(A))).toEqual([]);
    expect(exposure.total(String(A))).toBe(0);
  });

  it('learns contract names from live contract events (a nameless contract is not indexed)', () => {
    const { mirror, exposure } = setup();
    mirror.apply('contract', 'Created', { id: 3, name: 'CLF7' });
    mirror.apply('contract', 'Created', { id: 4 });
    expect(exposure.contractId('CLF7')).toBe(3);
    expect(exposure.contractId('undefined')).toBeUndefined();
  });

  it('inactive (busted) fills and fill deletions never move the position, live or in a snapshot', () => {
    const { mirror, order, now } = setup();
    const id = order('Buy', 2);
    mirror.apply('fill', 'Created', { id: 901, orderId: id, contractId: C, action: 'Buy', qty: 1, price: 5000, active: false });
    expect(now()).toEqual({ net: 0, buying: 2, selling: 0 });
    mirror.apply('fill', 'Created', { id: 902, orderId: id, contractId: C, action: 'Buy', qty: 1, price: 5000 });
    mirror.apply('fill', 'Deleted', { id: 902 });
    expect(now()).toEqual({ net: 1, buying: 1, selling: 0 });
    const fresh = setup({
      orders: [{ id: 60, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Working' }],
      orderVersions: [{ id: 61, orderId: 60, orderQty: 3 }],
      fills: [
        { id: 62, orderId: 60, contractId: C, action: 'Buy', qty: 1, price: 5000 },
        { id: 63, orderId: 60, contractId: C, action: 'Buy', qty: 1, price: 5000, active: false },
      ],
    });
    expect(fresh.now()).toEqual({ net: 0, buying: 2, selling: 0 });
  });

  it('the same early fill delivered twice counts once; a fill without a contract id uses its order’s', () => {
    const { mirror, now } = setup();
    const id = nextId++;
    const early = { id: nextId++, orderId: id, action: 'Buy', qty: 2, price: 5000 };
    mirror.apply('fill', 'Created', early);
    mirror.apply('fill', 'Updated', early);
    mirror.apply('order', 'Created', { id, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Filled' });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id, orderQty: 2 });
    expect(now()).toEqual({ net: 2, buying: 0, selling: 0 });
  });

  it('a deleted order stops counting; a version for an unknown order changes nothing', () => {
    const { mirror, order, now } = setup();
    const id = order('Buy', 2);
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: 424242, orderQty: 5 });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderQty: 5 });
    expect(now()).toEqual({ net: 0, buying: 2, selling: 0 });
    mirror.apply('order', 'Deleted', { id });
    expect(now()).toEqual({ net: 0, buying: 0, selling: 0 });
  });

  it('a snapshot skips final orders and counts a working order’s fills against its quantity', () => {
    const { now, exposure } = setup({
      positions: [{ id: 70, accountId: A, contractId: C, netPos: 1 }],
      orders: [
        { id: 71, accountId: A, contractId: C, action: 'Sell', ordStatus: 'Working' },
        { id: 72, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Expired' },
        { id: 73, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Rejected' },
      ],
      orderVersions: [{ id: 74, orderId: 71, orderQty: 4 }, { id: 75, orderId: 72, orderQty: 2 }, { id: 76, orderId: 73, orderQty: 2 }],
      fills: [{ id: 77, orderId: 71, contractId: C, action: 'Sell', qty: 1, price: 5000 }],
    });
    expect(now()).toEqual({ net: 1, buying: 0, selling: 3 });
    expect(exposure.total(String(A))).toBe(2);
  });

  it('a position with nothing working is listed among the account’s contracts', () => {
    const { exposure } = setup({ positions: [{ id: 80, accountId: A, contractId: C, netPos: -2 }] });
    expect(exposure.contracts(String(A))).toEqual([{ contractId: C, exposure: { net: -2, buying: 0, selling: 0 } }]);
  });

  it('holds end one by one: releasing one leaves another bound to its order until that order is reported', () => {
    const { mirror, exposure, now } = setup();
    const first = exposure.hold(String(A), C, 'buy', 1);
    const second = exposure.hold(String(A), C, 'buy', 2);
    const [id1, id2] = [nextId++, nextId++];
    first.bind(id1);
    second.bind(id2);
    first.release();
    expect(now().buying).toBe(2);
    mirror.apply('order', 'Created', { id: id2, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Working' });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id2, orderQty: 2 });
    // The order's own quantity replaces the hold's: 2, not 4.
    expect(now().buying).toBe(2);
  });

  it('a fill deletion is never counted as a fill, even for a fill never seen', () => {
    const { mirror, order, now } = setup();
    const id = order('Buy', 2);
    mirror.apply('fill', 'Deleted', { id: nextId++, orderId: id, contractId: C, action: 'Buy', qty: 1, price: 5000 });
    expect(now()).toEqual({ net: 0, buying: 2, selling: 0 });
  });

  it('different fills arriving before their order all count when it shows up', () => {
    const { mirror, now } = setup();
    const id = nextId++;
    mirror.apply('fill', 'Created', { id: nextId++, orderId: id, contractId: C, action: 'Buy', qty: 1, price: 5000 });
    mirror.apply('fill', 'Created', { id: nextId++, orderId: id, contractId: C, action: 'Buy', qty: 2, price: 5000 });
    mirror.apply('order', 'Created', { id, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Filled' });
    mirror.apply('orderVersion', 'Created', { id: nextId++, orderId: id, orderQty: 3 });
    expect(now()).toEqual({ net: 3, buying: 0, selling: 0 });
  });

  it('a one-cancels-other pair without a parent counts its larger leg once', () => {
    const { mirror, order, now } = setup();
    const a = order('Sell', 2);
    const b = order('Sell', 3, { ocoId: a });
    mirror.apply('order', 'Updated', { ...mirror.get('order', a)!, ocoId: b });
    expect(now()).toEqual({ net: 0, buying: 0, selling: 3 });
  });

  it('separate orders, separate brackets and separate one-cancels-other pairs each count', () => {
    const { mirror, order, now } = setup();
    order('Buy', 1);
    order('Buy', 2);
    expect(now().buying).toBe(3);
    for (const entry of [order('Buy', 1), order('Buy', 1)]) order('Sell', 1, { parentId: entry });
    expect(now()).toEqual({ net: 0, buying: 5, selling: 2 });
    for (let i = 0; i < 2; i++) {
      const a = order('Sell', 1);
      const b = order('Sell', 1, { ocoId: a });
      mirror.apply('order', 'Updated', { ...mirror.get('order', a)!, ocoId: b });
    }
    expect(now()).toEqual({ net: 0, buying: 5, selling: 4 });
  });

  it('a resync ends the holds of orders the snapshot reports, working or final, and keeps the others', () => {
    const { mirror, exposure, now } = setup();
    const working = exposure.hold(String(A), C, 'buy', 2);
    const rejected = exposure.hold(String(A), C, 'buy', 3);
    const unreported = exposure.hold(String(A), C, 'sell', 1);
    working.bind(90);
    rejected.bind(91);
    unreported.bind(92);
    expect(now()).toEqual({ net: 0, buying: 5, selling: 1 });
    mirror.replace({
      accounts: [{ id: A, name: 'A' }],
      contracts: [{ id: C, name: 'ESZ6' }],
      orders: [
        { id: 90, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Working' },
        { id: 91, accountId: A, contractId: C, action: 'Buy', ordStatus: 'Rejected' },
      ],
      orderVersions: [{ id: 93, orderId: 90, orderQty: 2 }, { id: 94, orderId: 91, orderQty: 3 }],
    });
    expect(now()).toEqual({ net: 0, buying: 2, selling: 1 });
    unreported.release();
    working.release();
    expect(now()).toEqual({ net: 0, buying: 2, selling: 0 });
  });
});
