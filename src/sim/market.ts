/**
 * The recorded paper market of each contract: every price change of the walk (or of the control
 * API) is a trade tick with a synthetic size; ticks roll up into one-minute bars, the trade
 * date's open/high/low/volume and a volume-at-price histogram. Chart history and market data
 * messages are built from this record. Each tick costs O(1); memory is bounded by ring caps.
 */
import { roundToTick } from './contracts.js';
import { seededRandom } from './prices.js';

/** One trade tick. */
export interface Tick {
  id: number;
  t: number;
  price: number;
  size: number;
}

/** An OHLC bar as Tradovate's chart `bars` carry it (`t` = bucket start in ms). */
export interface Bar {
  t: number;
  open: number;
  high: number;
  low: number;
  close: number;
  upVolume: number;
  downVolume: number;
  upTicks: number;
  downTicks: number;
  bidVolume: number;
  offerVolume: number;
}

/** The trade date's statistics and histogram (volume per tick offset from `base`). */
export interface DayStats {
  tradeDateKey: number;
  open: number;
  high: number;
  low: number;
  volume: number;
  /** Last price of the previous trade date, once there was one. */
  settlement?: number;
  base: number;
  histogram: Map<number, number>;
}

/** Recorded ticks kept per contract. */
export const MAX_TICKS = 10_000;
/** Recorded one-minute bars kept per contract (two weeks). */
export const MAX_MINUTES = 20_160;

const MINUTE = 60_000;

/** A bounded list: appends are O(1), the oldest entries fall off. */
export class Ring<T> {
  private items: T[] = [];
  private head = 0;

  constructor(private readonly cap: number) {}

  push(item: T): void {
    this.items.push(item);
    // Compact now and then rather than shift() on every append.
    if (this.items.length - this.head > this.cap) this.head++;
    if (this.head > 4096) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }

  get length(): number {
    return this.items.length - this.head;
  }

  /** The i-th oldest retained entry. */
  at(i: number): T | undefined {
    return this.items[this.head + i];
  }

  last(): T | undefined {
    return this.items.length > this.head ? this.items[this.items.length - 1] : undefined;
  }

  /** The newest `n` entries, oldest first. */
  tail(n: number): T[] {
    return this.items.slice(Math.max(this.head, this.items.length - n));
  }
}

/** Adds one tick to a bar (`prev` = the price before it, for up/down volume). */
export function addToBar(bar: Bar, price: number, size: number, prev: number): void {
  bar.high = Math.max(bar.high, price);
  bar.low = Math.min(bar.low, price);
  bar.close = price;
  if (price >= prev) {
    bar.upVolume += size;
    bar.upTicks++;
    bar.offerVolume += size;
  } else {
    bar.downVolume += size;
    bar.downTicks++;
    bar.bidVolume += size;
  }
}

/** A bar that opens with one tick. */
export function newBar(t: number, price: number, size: number, prev: number): Bar {
  const bar: Bar = { t, open: price, high: price, low: price, close: price, upVolume: 0, downVolume: 0, upTicks: 0, downTicks: 0, bidVolume: 0, offerVolume: 0 };
  addToBar(bar, price, size, prev);
  return bar;
}

/** The record of one contract. */
export class ContractTape {
  readonly ticks = new Ring<Tick>(MAX_TICKS);
  readonly minutes = new Ring<Bar>(MAX_MINUTES);
  day?: DayStats;
  /** Price before the first recorded tick (where synthetic history ends). */
  readonly startPrice: number;
  /** When recording began. */
  readonly startedAt: number;
  // Synthetic history counts down from here, so every tick id is positive and ids grow with time.
  private nextTickId = 1_000_001;
  private lastPrice: number;

  constructor(
    readonly contractId: number,
    readonly tickSize: number,
    price: number,
    now: number,
  ) {
    this.startPrice = price;
    this.startedAt = now;
    this.lastPrice = price;
  }

  /** The last recorded price (the start price before the first tick). */
  get last(): number {
    return this.lastPrice;
  }

  /** Records a trade at `price`; returns the tick. */
  record(price: number, size: number, now: number, tradeDateKey: number): Tick {
    const prev = this.lastPrice;
    this.lastPrice = price;
    const tick: Tick = { id: this.nextTickId++, t: now, price, size };
    this.ticks.push(tick);
    const minute = Math.floor(now / MINUTE) * MINUTE;
    const bar = this.minutes.last();
    if (bar && bar.t === minute) addToBar(bar, price, size, prev);
    else this.minutes.push(newBar(minute, price, size, prev));
    let day = this.day;
    if (!day || day.tradeDateKey !== tradeDateKey) {
      day = { tradeDateKey, open: price, high: price, low: price, volume: 0, settlement: day ? prev : undefined, base: price, histogram: new Map() };
      this.day = day;
    }
    day.high = Math.max(day.high, price);
    day.low = Math.min(day.low, price);
    day.volume += size;
    const level = Math.round((price - day.base) / this.tickSize);
    day.histogram.set(level, (day.histogram.get(level) ?? 0) + size);
    return tick;
  }
}

/** Every contract's tape; sizes come from their own seeded sequence so the price walk stays as seeded. */
export class MarketTape {
  private readonly tapes = new Map<number, ContractTape>();
  private readonly sizes: () => number;

  constructor(seed: number) {
    this.sizes = seededRandom(seed ^ 0x7a9e);
  }

  /** The tape of a contract, started at `price` when it has none yet. */
  tape(contractId: number, tickSize: number, price: number, now: number): ContractTape {
    let tape = this.tapes.get(contractId);
    if (!tape) this.tapes.set(contractId, (tape = new ContractTape(contractId, tickSize, roundToTick(price, tickSize), now)));
    return tape;
  }

  /** The tape of a contract, if it was started. */
  get(contractId: number): ContractTape | undefined {
    return this.tapes.get(contractId);
  }

  /** Records a price change on a tape as a trade of 1–10 lots. */
  record(tape: ContractTape, price: number, now: number, tradeDateKey: number): Tick {
    return tape.record(price, 1 + Math.floor(this.sizes() * 10), now, tradeDateKey);
  }
}
