import { describe, expect, it } from 'vitest';
import { AppError } from '../../../../src/domain/problems.js';
import { isAccessDenied } from '../../../../workers/connection-actor/access.js';
import { flatten } from '../../../../workers/connection-actor/flatten.js';
import { placeOrder } from '../../../../workers/connection-actor/place.js';
import { ACCOUNT, fakeActorContext, newOrder } from '../../../support/broker-link.js';
import { rejected } from '../../../support/errors.js';

const denied = () => ({ failureReason: 'UnknownReason', failureText: 'Access is denied' });

describe('an order refused with "Access is denied"', () => {
  it('is ACCOUNT_INACTIVE when account/list, asked at once, no longer has the account', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.handlers['order/placeorder'] = denied;
    broker.listed = [];
    const err = await rejected(placeOrder(ctx, newOrder()));
    expect(err).toMatchObject({ code: 'ACCOUNT_INACTIVE', message: 'Account is inactive' });
    expect(broker.sent.map((s) => s.endpoint)).toEqual(['order/placeorder', 'account/list']);
    expect(ctx.model.accounts()).toMatchObject([{ id: ACCOUNT, active: false }]);
  });

  it('stays BROKER_REJECTED while the broker still lists the account', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.handlers['order/placeorder'] = denied;
    const err = await rejected(placeOrder(ctx, newOrder()));
    expect(err).toMatchObject({ code: 'BROKER_REJECTED', extensions: { brokerReason: 'UnknownReason: Access is denied' } });
  });

  it('other refusals do not ask for the account list', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.handlers['order/placeorder'] = () => ({ failureReason: 'UnknownReason', failureText: 'Price is off tick' });
    broker.listed = [];
    expect((await rejected(placeOrder(ctx, newOrder()))).code).toBe('BROKER_REJECTED');
    expect(broker.bodies('account/list')).toEqual([]);
  });

  it('applies to flatten too: a cancel denied on a revoked account is ACCOUNT_INACTIVE', async () => {
    const { broker, ctx } = fakeActorContext();
    broker.addOrder({ price: 4990 });
    broker.handlers['order/cancelorder'] = denied;
    broker.listed = [];
    expect((await rejected(flatten(ctx, { type: 'flatten', accountId: ACCOUNT }))).code).toBe('ACCOUNT_INACTIVE');
  });

  it('isAccessDenied reads the broker reason of a BROKER_REJECTED only', () => {
    expect(isAccessDenied(new AppError('BROKER_REJECTED', 'x', { brokerReason: 'UnknownReason: Access is denied' }))).toBe(true);
    expect(isAccessDenied(new AppError('BROKER_REJECTED', 'x', { brokerReason: 'MaxPosLimitReached' }))).toBe(false);
    expect(isAccessDenied(new AppError('NOT_FOUND', 'Access is denied'))).toBe(false);
    expect(isAccessDenied(new Error('Access is denied'))).toBe(false);
  });
});
