/** Tolerant readers of request text: template-literal `undefined` bodies, quoted authorize tokens. */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { authorizeToken, parseBodyText, parseQueryText } from '../../../src/sim/wire.js';

it('reads an empty, `undefined` or `null` body as none, JSON as JSON, anything else as a 400 text', () => {
  for (const t of ['', '  ', 'undefined', 'null', ' undefined\n']) expect(parseBodyText(t)).toEqual({ body: undefined });
  expect(parseBodyText('{\n  "a": 1\n}')).toEqual({ body: { a: 1 } });
  expect(parseBodyText('[1]')).toEqual({ body: [1] });
  expect(parseBodyText("{'a':1}")).toMatchObject({ error: expect.stringMatching(/^Malformed JSON body/) });
});

it('reads a query line of `undefined` as empty', () => {
  expect([...parseQueryText('undefined').keys()]).toEqual([]);
  expect(parseQueryText('name=ESZ6').get('name')).toBe('ESZ6');
});

it('takes the authorize token raw, JSON-quoted or inside {token}/{accessToken}', () => {
  expect(authorizeToken('abc.def')).toBe('abc.def');
  expect(authorizeToken('"abc.def"')).toBe('abc.def');
  expect(authorizeToken('{\n  "token": "abc.def"\n}')).toBe('abc.def');
  expect(authorizeToken('{"accessToken":"abc.def"}')).toBe('abc.def');
  expect(authorizeToken('"unterminated')).toBe('"unterminated');
  fc.assert(fc.property(fc.string({ minLength: 1 }).filter((s) => s.trim() === s && !s.startsWith('"') && !s.startsWith('{')), (token) => {
    expect(authorizeToken(token)).toBe(token);
    expect(authorizeToken(JSON.stringify(token))).toBe(token);
  }));
});
