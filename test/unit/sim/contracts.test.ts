/** Contract names, stable ids, listed months and product entities of the paper broker. */
import { expect, it } from 'vitest';
import { ContractRegistry, parseContractName } from '../../../src/sim/contracts.js';

it('parses ROOT + month code + one year digit, including roots with digits', () => {
  expect(parseContractName('ESZ6')).toEqual({ root: 'ES', month: 12, yearDigit: 6 });
  expect(parseContractName('M2KH7')).toEqual({ root: 'M2K', month: 3, yearDigit: 7 });
  expect(parseContractName('6EM6')).toEqual({ root: '6E', month: 6, yearDigit: 6 });
  expect(parseContractName('ESZ26')).toBeUndefined();
  expect(parseContractName('ES')).toBeUndefined();
});

it('creates a contract on first use and returns the same id afterwards, case-insensitively', () => {
  const r = new ContractRegistry();
  const a = r.find('ESZ6')!;
  const b = r.find('MNQH7')!;
  expect(b.id).toBe(a.id + 1);
  expect(r.find('esz6')).toBe(a);
  expect(r.item(a.id)?.name).toBe('ESZ6');
  expect(r.productOf(b.id)).toMatchObject({ name: 'MNQ', tickSize: 0.25, pointValue: 2 });
});

it('knows no contract for unknown roots or months the product does not list', () => {
  const r = new ContractRegistry();
  expect(r.find('E6H9')).toBeUndefined();
  expect(r.find('ESF6')).toBeUndefined(); // ES lists H M U Z only
  expect(r.find('CLF7')?.name).toBe('CLF7');
});

it('describes products the way product/find does (valuePerPoint, tickSize, priceFormat)', () => {
  const r = new ContractRegistry();
  expect(r.productEntity(r.product('ZN')!)).toMatchObject({ name: 'ZN', tickSize: 0.015625, valuePerPoint: 1000, priceFormatType: 'Decimal' });
  const k = r.find('GCZ6')!;
  expect(r.maturityEntity(k, Date.parse('2026-11-20T15:00:00Z'))).toMatchObject({ id: k.contractMaturityId, expirationMonth: 2612, productId: r.product('GC')!.id });
});
