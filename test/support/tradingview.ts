/**
 * The README's TradingView alert message as TradingView fills it in when an order of a strategy
 * fires: each `{{…}}` of the template filled with the value it would have.
 */
import { TRADINGVIEW_TEMPLATE } from '../../src/http/webhook-payload.js';

export interface StrategyFire {
  /** {{strategy.order.id}}: the entry's name, or e.g. `Close entry(s) order Long` for a strategy.close. */
  orderId: string;
  /** {{strategy.order.action}} */
  action: 'buy' | 'sell';
  /** {{ticker}} */
  ticker: string;
  /** {{strategy.order.contracts}} */
  contracts: string;
  /** {{strategy.market_position}} after the order */
  marketPosition: 'long' | 'short' | 'flat';
  /** {{strategy.position_size}} after the order: signed (short is negative), 0 when flat */
  positionSize: number;
  /** {{timenow}} */
  time: string;
}

/** The alert body TradingView sends for one fired strategy order. */
export function filledTemplate(fire: StrategyFire): string {
  return TRADINGVIEW_TEMPLATE.replace('{{strategy.order.id}}', fire.orderId)
    .replace(/\{\{timenow\}\}/g, fire.time)
    .replace('{{strategy.order.action}}', fire.action)
    .replace('{{ticker}}', fire.ticker)
    .replace('{{strategy.order.contracts}}', fire.contracts)
    .replace('{{strategy.market_position}}', fire.marketPosition)
    .replace('{{strategy.market_position_size}}', String(Math.abs(fire.positionSize)))
    .replace('{{strategy.position_size}}', String(fire.positionSize));
}
