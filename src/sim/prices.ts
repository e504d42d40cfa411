/**
 * Seeded synthetic prices: one tick-aligned random walk per contract. A price set through
 * the control API pins the contract (the walk leaves it alone) so tests can rely on it.
 */
import { roundToTick, type ContractRegistry } from './contracts.js';

/** mulberry32: small, fast, good enough for synthetic prices; same seed → same sequence. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface PriceState {
  last: number;
  pinned: boolean;
}

/** Last prices of every contract in use. */
export class PriceBook {
  private readonly prices = new Map<number, PriceState>();

  constructor(
    private readonly contracts: ContractRegistry,
    private readonly random: () => number,
  ) {}

  /** The last price; the first call starts the walk near the product's base price. */
  last(contractId: number): number {
    return this.state(contractId).last;
  }

  /** Sets the last price (already tick-aligned by the caller) and pins the contract. */
  set(contractId: number, price: number): void {
    const s = this.state(contractId);
    s.last = price;
    s.pinned = true;
  }

  /** Lets the walk move a pinned contract again. */
  unpin(contractId: number): void {
    this.state(contractId).pinned = false;
  }

  /** Moves every unpinned contract by -1, 0 or +1 tick; returns the ids that moved. */
  step(): number[] {
    const moved: number[] = [];
    for (const [id, s] of this.prices) {
      if (s.pinned) continue;
      const r = this.random();
      const delta = r < 1 / 3 ? -1 : r < 2 / 3 ? 0 : 1;
      if (delta === 0) continue;
      const tick = this.contracts.productOf(id).tickSize;
      s.last = Math.max(tick, roundToTick(s.last + delta * tick, tick));
      moved.push(id);
    }
    return moved;
  }

  /** Snapshot `{contractName: price}` for the control API. */
  snapshot(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, s] of this.prices) out[this.contracts.item(id)?.name ?? String(id)] = s.last;
    return out;
  }

  private state(contractId: number): PriceState {
    let s = this.prices.get(contractId);
    if (!s) {
      const p = this.contracts.productOf(contractId);
      // Start within ±1% of the base so different seeds give different but plausible prices.
      const start = p.basePrice * (1 + (this.random() - 0.5) * 0.02);
      s = { last: roundToTick(start, p.tickSize), pinned: false };
      this.prices.set(contractId, s);
    }
    return s;
  }
}
