/**
 * Closed trades from fills, FIFO-paired per account and contract: each exit fill closes the
 * oldest open lots first. A fill that crosses through zero closes the open side and opens
 * the rest on the other side. Pure. The one pairing of the service (the actor's trade
 * history); the paper broker applies the same FIFO rule fill by fill (sim/positions.ts).
 */
import type { ClosedTrade } from './orders.js';

/** One fill, already resolved to account and contract name. */
export interface FillInput {
  fillId: string;
  orderId: string;
  accountId: string;
  symbol: string;
  side: 'buy' | 'sell';
  qty: number;
  price: number;
  /** ISO-8601 */
  timestamp: string;
}

interface Lot {
  fill: FillInput;
  remaining: number;
}

/** Pairs fills into closed trades. `pointValue(symbol)` converts points to account currency. */
export function pairTrades(fills: FillInput[], pointValue: (symbol: string) => number): ClosedTrade[] {
  const sorted = [...fills].sort((a, b) => (a.timestamp === b.timestamp ? compareIds(a.fillId, b.fillId) : a.timestamp < b.timestamp ? -1 : 1));
  const open = new Map<string, Lot[]>();
  const trades: ClosedTrade[] = [];
  for (const fill of sorted) {
    const key = `${fill.accountId}|${fill.symbol}`;
    let lots = open.get(key);
    if (!lots) open.set(key, (lots = []));
    let qty = fill.qty;
    while (qty > 0 && lots.length && lots[0]!.fill.side !== fill.side) {
      const lot = lots[0]!;
      const q = Math.min(qty, lot.remaining);
      const long = lot.fill.side === 'buy';
      const pnlPoints = round((long ? fill.price - lot.fill.price : lot.fill.price - fill.price), 10);
      trades.push({
        id: `${lot.fill.fillId}-${fill.fillId}`,
        accountId: fill.accountId,
        symbol: fill.symbol,
        direction: long ? 'long' : 'short',
        qty: q,
        entryPrice: lot.fill.price,
        exitPrice: fill.price,
        openedAt: lot.fill.timestamp,
        closedAt: fill.timestamp,
        pnlPoints,
        pnl: round(pnlPoints * pointValue(fill.symbol) * q, 2),
        entryOrderIds: [lot.fill.orderId],
        exitOrderIds: [fill.orderId],
      });
      lot.remaining -= q;
      qty -= q;
      if (lot.remaining === 0) lots.shift();
    }
    if (qty > 0) lots.push({ fill, remaining: qty });
  }
  return trades;
}

function compareIds(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  return a < b ? -1 : a > b ? 1 : 0;
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
