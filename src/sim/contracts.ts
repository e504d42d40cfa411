/**
 * The paper broker's contract universe: products with tick size and point value, and
 * contracts created on first use from a Tradovate-style name (`ESZ6`). Ids are assigned in
 * order of first use and never change for the life of the simulator.
 */
import { getProduct, listProducts, monthNumber } from '../domain/products.js';
import { contractOf, frontMonth } from '../domain/symbols.js';
import { tickDecimals } from '../domain/ticks.js';

export { isOnTick, roundToTick } from '../domain/ticks.js';

/** What the simulator needs to know about a product root. */
export interface SimProduct {
  id: number;
  name: string;
  description: string;
  tickSize: number;
  pointValue: number;
  /** Listed month codes, e.g. `HMUZ`. */
  months: string;
  /** Where the synthetic price walk starts (before the seeded offset). */
  basePrice: number;
}

/** Tradovate `contract` entity. */
export interface ContractEntity {
  id: number;
  name: string;
  contractMaturityId: number;
  [field: string]: unknown;
}

const NAME_PATTERN = /^(.+)([FGHJKMNQUVXZ])(\d)$/;

/** Splits `ESZ6` into root, month (1..12) and year digit; undefined when the shape is wrong. */
export function parseContractName(name: string): { root: string; month: number; yearDigit: number } | undefined {
  const m = NAME_PATTERN.exec(name.toUpperCase());
  if (!m) return undefined;
  return { root: m[1]!, month: monthNumber(m[2]!)!, yearDigit: Number(m[3]) };
}


/** Four-digit year of a one-digit contract year: the nearest year at or after now's ending in it. */
export function contractYear(digit: number, now: number): number {
  const current = new Date(now).getUTCFullYear();
  return current + ((digit - (current % 10) + 10) % 10);
}

/** Product catalogue plus the contracts created so far. */
export class ContractRegistry {
  private readonly products = new Map<string, SimProduct>();
  private readonly productsById = new Map<number, SimProduct>();
  private readonly byName = new Map<string, ContractEntity>();
  private readonly byId = new Map<number, ContractEntity>();
  private readonly rootOf = new Map<number, SimProduct>();
  private nextContractId = 4_000_001;

  constructor() {
    listProducts().forEach((p, i) => {
      const product: SimProduct = {
        id: 100 + i, name: p.root, description: p.description, tickSize: p.tickSize, pointValue: p.pointValue,
        months: p.months.join(''), basePrice: p.referencePrice,
      };
      this.products.set(product.name, product);
      this.productsById.set(product.id, product);
    });
  }

  /** Product by root (`ES`), case-insensitive. */
  product(root: string): SimProduct | undefined {
    return this.products.get(root.toUpperCase());
  }

  /** Every product of the catalogue. */
  allProducts(): SimProduct[] {
    return [...this.products.values()];
  }

  /** Product by id. */
  productById(id: number): SimProduct | undefined {
    return this.productsById.get(id);
  }

  /** Finds or creates the contract for a well-formed name of a known root. */
  find(name: string): ContractEntity | undefined {
    const upper = name.toUpperCase();
    const known = this.byName.get(upper);
    if (known) return known;
    const parsed = parseContractName(upper);
    const product = parsed && this.product(parsed.root);
    // Like Tradovate, a month the product does not list is no contract at all.
    if (!parsed || !product || !product.months.includes(upper.charAt(upper.length - 2))) return undefined;
    const id = this.nextContractId++;
    const contract: ContractEntity = { id, name: upper, contractMaturityId: id + 1_000_000, status: 'DefinitionChecked', providerTickSize: product.tickSize };
    this.byName.set(upper, contract);
    this.byId.set(id, contract);
    this.rootOf.set(id, product);
    return contract;
  }

  /** Contract by id, if it was created. */
  item(id: number): ContractEntity | undefined {
    return this.byId.get(id);
  }

  /** The product a contract belongs to. */
  productOf(contractId: number): SimProduct {
    const p = this.rootOf.get(contractId);
    if (!p) throw new Error(`unknown contract ${contractId}`);
    return p;
  }

  /** Every contract created so far. */
  contracts(): ContractEntity[] {
    return [...this.byId.values()];
  }

  /** Tradovate `product` entity for a product. */
  productEntity(p: SimProduct): Record<string, unknown> {
    return {
      id: p.id, name: p.name, currencyId: 1, productType: 'Futures', description: p.description, exchangeId: 1,
      contractGroupId: 1, status: 'Verified', months: p.months, isSecured: false, valuePerPoint: p.pointValue,
      priceFormatType: 'Decimal', priceFormat: -tickDecimals(p.tickSize), tickSize: p.tickSize, isMicro: p.name.startsWith('M'),
    };
  }

  /** Contract by maturity id, if it was created. */
  byMaturity(maturityId: number): ContractEntity | undefined {
    return this.byId.get(maturityId - 1_000_000);
  }

  /**
   * Tradovate `contractMaturity` entity for a contract at `now`: the year is the nearest one at
   * or after now's ending in the name's digit, the expiration the product's last trading day,
   * and `isFront` marks the front month (the nearest contract not yet rolled past).
   */
  maturityEntity(contract: ContractEntity, now: number): Record<string, unknown> {
    const parsed = parseContractName(contract.name)!;
    const product = this.productOf(contract.id);
    const year = contractYear(parsed.yearDigit, now);
    const dated = contractOf(getProduct(product.name)!, year, parsed.month);
    return {
      id: contract.contractMaturityId, productId: product.id, expirationMonth: (year - 2000) * 100 + parsed.month,
      expirationDate: `${dated.expiry}T21:00:00.000Z`, isFront: frontMonth(product.name, new Date(now))?.contract === contract.name,
      archived: false,
    };
  }

  /**
   * `contract/suggest`: contracts whose name starts with `text` — for a root, its listed
   * contracts from the front month on (created on first use like `find`), shortest roots first.
   */
  suggest(text: string, limit: number, now: number): ContractEntity[] {
    const t = text.trim().toUpperCase();
    if (!t) return [];
    const out: ContractEntity[] = [];
    const roots = [...this.products.keys()].filter((r) => r.startsWith(t) || t.startsWith(r)).sort((a, b) => a.length - b.length || a.localeCompare(b));
    for (const root of roots) {
      const front = frontMonth(root, new Date(now));
      if (!front) continue;
      const product = getProduct(root)!;
      let year = front.year;
      let month = monthNumber(front.monthCode)!;
      // A root lists at most 12 months a year: four years ahead is enough for any limit ≤ 48.
      for (let n = 0; n < 48 && out.length < limit; n++) {
        const name = contractOf(product, year, month).contract;
        if (product.months.includes(name.charAt(name.length - 2) as never) && name.startsWith(t)) {
          const k = this.find(name);
          if (k && !out.includes(k)) out.push(k);
        }
        month = month === 12 ? 1 : month + 1;
        if (month === 1) year++;
      }
      if (out.length >= limit) break;
    }
    return out;
  }
}
