/**
 * A strategy's take-profit and stop-loss prices, checked when the strategy is written rather
 * than when an alert fires (an alert is the worst moment to learn that a saved stop of 1e21
 * can never trade). With a symbol, each price must sit on that contract's tick inside its
 * band, the rule every order meets (order-plan.ts). Without one, the alert names the product,
 * so each price must at least be one some product of the catalogue can trade, and the two
 * legs one product can trade together. Pure.
 */
import type { LegInput } from './orders.js';
import { priceBand } from './order-plan.js';
import { AppError } from './problems.js';
import { listProducts, type Product } from './products.js';
import { resolveSymbol } from './symbols.js';
import { priceToTicks } from './ticks.js';

/** The legs of a strategy as stored. */
export interface StrategyLegs {
  symbol?: string | null;
  takeProfit?: LegInput | null;
  stopLoss?: LegInput | null;
  /** The strategy's entry type (none: market). */
  orderType?: string | null;
}

type FieldError = { path: string; message: string };

function admits(product: Product, price: number, factor: number): 'ok' | 'band' | 'tick' {
  const band = priceBand(product.referencePrice, product.tickSize, factor);
  if (!(price >= band.min && price <= band.max)) return 'band';
  return priceToTicks(price, product.tickSize) === undefined ? 'tick' : 'ok';
}

function pricedLegs(legs: StrategyLegs): [string, number][] {
  return (['takeProfit', 'stopLoss'] as const).flatMap((name) => {
    const leg = legs[name];
    return leg && 'price' in leg ? [[`${name}.price`, leg.price] as [string, number]] : [];
  });
}

/**
 * Throws PRICE_OUT_OF_RANGE (a price outside the band, or fitting no product) or
 * VALIDATION_FAILED (off the tick), each with `errors: [{path, message}]`, when a leg price of
 * the strategy can never trade. An unknown symbol is the caller's to refuse first.
 */
export function checkStrategyLegs(legs: StrategyLegs, now: Date, factor: number): void {
  // One leg at a price and the other in ticks is measured from the entry's price: a market entry
  // has none, so every alert of such a strategy would be refused (new-user probe: 201 here, then
  // 400 on every alert).
  const tp = legs.takeProfit;
  const sl = legs.stopLoss;
  if (tp && sl && ('ticks' in tp) !== ('ticks' in sl) && (legs.orderType ?? 'market') === 'market') {
    const path = 'ticks' in tp ? 'stopLoss' : 'takeProfit';
    const message = 'a market entry has no price to measure a fixed leg from while the other leg is in ticks: give both legs as prices or both in ticks, or set orderType limit or stop (the alert then names the price)';
    throw new AppError('VALIDATION_FAILED', `${path}: ${message}`, { errors: [{ path, message }] });
  }
  const priced = pricedLegs(legs);
  if (priced.length === 0) return;
  const resolved = legs.symbol ? resolveSymbol(legs.symbol, now) : null;
  if (resolved && !resolved.ok) return;
  const range: FieldError[] = [];
  const ticks: FieldError[] = [];
  if (resolved) {
    const product = resolved.product;
    const band = priceBand(product.referencePrice, product.tickSize, factor);
    for (const [path, price] of priced) {
      const verdict = admits(product, price, factor);
      if (verdict === 'band') range.push({ path, message: `${price} is outside ${band.min}..${band.max} for ${resolved.contract}` });
      if (verdict === 'tick') ticks.push({ path, message: `${price} is not on the ${product.tickSize} tick of ${resolved.contract}` });
    }
    if (range.length) throw new AppError('PRICE_OUT_OF_RANGE', detailOf(range), { errors: range, band: { min: band.min, max: band.max, reference: band.reference } });
    if (ticks.length) throw new AppError('VALIDATION_FAILED', detailOf(ticks), { errors: ticks });
    return;
  }
  const products = listProducts();
  const fitting = priced.map(([, price]) => products.filter((p) => admits(p, price, factor) === 'ok'));
  priced.forEach(([path, price], i) => {
    if (fitting[i]!.length === 0) range.push({ path, message: `${price} is a price no product can trade (on its tick and within its band); set the strategy's symbol to check against one contract` });
  });
  if (range.length) throw new AppError('PRICE_OUT_OF_RANGE', detailOf(range), { errors: range });
  if (fitting.length === 2 && !fitting[0]!.some((p) => fitting[1]!.includes(p))) {
    const both = priced.map(([path, price], i) => ({ path, message: `${price} fits ${fitting[i]!.map((p) => p.root).join(', ')} only: no product trades both legs` }));
    throw new AppError('PRICE_OUT_OF_RANGE', detailOf(both), { errors: both });
  }
}

function detailOf(errors: FieldError[]): string {
  return errors.map((e) => `${e.path}: ${e.message}`).join('; ');
}
