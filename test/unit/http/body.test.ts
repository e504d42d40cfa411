import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { AppError } from '../../../src/domain/problems.js';
import { firstRepeatedKey, hasBody, isJsonMediaType, jsonMemberCount, jsonNestsDeeperThan, MAX_JSON_DEPTH, MAX_JSON_FIELDS, MAX_LISTED_ERRORS, parseJsonBody, validate } from '../../../src/http/body.js';

const schema = z.strictObject({ symbol: z.string(), qty: z.number().int().positive(), takeProfit: z.strictObject({ price: z.number() }).optional() });

const codeOf = (fn: () => unknown): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err instanceof AppError ? err.code : 'NOT_AN_APP_ERROR';
  }
};

/** `CODE path: message` of the refusal of a JSON body, or 'parsed'. */
function refused(text: string): string {
  try {
    parseJsonBody(Buffer.from(text), 'application/json', false);
    return 'parsed';
  } catch (err) {
    const e = err as AppError;
    return `${e.code} ${(e.extensions['errors'] as { path: string }[])[0]!.path}: ${e.message}`;
  }
}

describe('media types and JSON parsing', () => {
  it('recognises JSON media types with parameters and +json suffixes', () => {
    expect(isJsonMediaType('application/json; charset=utf-8')).toBe(true);
    expect(isJsonMediaType('Application/JSON')).toBe(true);
    expect(isJsonMediaType('application/merge-patch+json')).toBe(true);
    expect(isJsonMediaType('text/plain')).toBe(false);
    expect(isJsonMediaType(undefined)).toBe(false);
  });

  it('415 for non-JSON bodies unless lenient, where any declared type is parsed as JSON', () => {
    const raw = Buffer.from('{"a":1}');
    expect(codeOf(() => parseJsonBody(raw, 'text/plain', false))).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(codeOf(() => parseJsonBody(raw, undefined, false))).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(parseJsonBody(raw, 'text/plain; charset=utf-8', true)).toEqual({ a: 1 });
    expect(parseJsonBody(raw, undefined, true)).toEqual({ a: 1 });
    expect(parseJsonBody(raw, 'application/x-www-form-urlencoded', true)).toEqual({ a: 1 });
    expect(codeOf(() => parseJsonBody(raw, 'application/x-www-form-urlencoded', false))).toBe('UNSUPPORTED_MEDIA_TYPE');
    expect(codeOf(() => parseJsonBody(Buffer.from('action=buy'), 'application/x-www-form-urlencoded', true))).toBe('VALIDATION_FAILED');
  });

  it('415 for a compressed body or a charset other than UTF-8, never read as something else; UTF-8 and US-ASCII labels are fine', () => {
    const raw = Buffer.from('{"a":1}');
    for (const encoding of ['gzip', 'br', 'deflate', 'x-custom']) {
      expect(codeOf(() => parseJsonBody(raw, 'application/json', false, encoding)), encoding).toBe('UNSUPPORTED_MEDIA_TYPE');
      expect(codeOf(() => parseJsonBody(raw, 'text/plain', true, encoding)), encoding).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    expect(parseJsonBody(raw, 'application/json', false, 'identity')).toEqual({ a: 1 });
    for (const type of ['application/json; charset=UTF-16', 'application/json; charset=latin1', 'application/json;charset="iso-8859-1"']) {
      expect(codeOf(() => parseJsonBody(raw, type, false)), type).toBe('UNSUPPORTED_MEDIA_TYPE');
    }
    for (const type of ['application/json; charset=utf-8', 'application/json; charset="UTF-8"', 'application/json;charset=us-ascii', 'text/plain; charset=utf8']) {
      expect(parseJsonBody(raw, type, true), type).toEqual({ a: 1 });
    }
  });

  it('400 VALIDATION_FAILED for malformed JSON; empty body is undefined', () => {
    expect(codeOf(() => parseJsonBody(Buffer.from('{'), 'application/json', false))).toBe('VALIDATION_FAILED');
    expect(parseJsonBody(Buffer.alloc(0), 'application/json', false)).toBeUndefined();
  });

  it('invalid UTF-8 is 400 (never read with U+FFFD in its place); a leading byte order mark is skipped', () => {
    const invalid = Buffer.concat([Buffer.from('{"name":"'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}')]);
    expect(() => parseJsonBody(invalid, 'application/json', false)).toThrowError(expect.objectContaining({ code: 'VALIDATION_FAILED', message: 'Request body is not valid UTF-8' }));
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"Ünïcödé 📈"}')]);
    expect(parseJsonBody(withBom, 'application/json', false)).toEqual({ name: 'Ünïcödé 📈' });
    expect(parseJsonBody(withBom, 'text/plain', true)).toEqual({ name: 'Ünïcödé 📈' });
  });

  it('400 VALIDATION_FAILED for bodies nested deeper than MAX_JSON_DEPTH (deep nesting overflowed the stack later: 500)', () => {
    const nest = (n: number) => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;
    expect(parseJsonBody(Buffer.from(nest(MAX_JSON_DEPTH)), 'application/json', false)).toBeTypeOf('object');
    expect(codeOf(() => parseJsonBody(Buffer.from(nest(MAX_JSON_DEPTH + 1)), 'application/json', false))).toBe('VALIDATION_FAILED');
    expect(codeOf(() => parseJsonBody(Buffer.from(`${'['.repeat(30_000)}${']'.repeat(30_000)}`), 'text/plain', true))).toBe('VALIDATION_FAILED');
  });

  it('counts only brackets outside strings, escapes included', () => {
    expect(jsonNestsDeeperThan(JSON.stringify({ s: '[[[[{{{{\\"[[[' }), 2)).toBe(false);
    const text = String.raw`[[["\\"],[[]]]]`;
    expect(JSON.parse(text)).toEqual([[['\\'], [[]]]]);
    expect(jsonNestsDeeperThan(text, 3)).toBe(true);
    expect(jsonNestsDeeperThan(text, 4)).toBe(false);
  });

  it('counts object members outside strings, and refuses more than MAX_JSON_FIELDS before parsing', () => {
    expect(jsonMemberCount('{"a":1,"b":{"c":":","d":[{"e":"\\":"}]}}', 32)).toBe(5);
    const fields = (n: number) => JSON.stringify(Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, { v: i }])));
    expect(jsonMemberCount(fields(10), 32)).toBe(20);
    expect(parseJsonBody(Buffer.from(fields(MAX_JSON_FIELDS / 2)), 'application/json', false)).toBeTypeOf('object');
    expect(codeOf(() => parseJsonBody(Buffer.from(fields(MAX_JSON_FIELDS / 2 + 1)), 'application/json', false))).toBe('VALIDATION_FAILED');
  });

  it('refuses a key written twice in one object, naming it, instead of keeping the last', () => {
    expect(refused('{"qty":1,"qty":5}')).toBe('VALIDATION_FAILED qty: qty: given more than once');
    expect(refused(String.raw`{"qty":1,"q\u0074y":5}`)).toBe('VALIDATION_FAILED qty: qty: given more than once');
    expect(refused('{"symbol":"ES","takeProfit":{"price":1,"ticks":2,"price":3}}')).toBe('VALIDATION_FAILED takeProfit.price: takeProfit.price: given more than once');
    expect(refused('{"legs":[{"a":1},{"a":2,"b":{},"a":3}]}')).toBe('VALIDATION_FAILED legs.1.a: legs.1.a: given more than once');
    // The same key in different objects, and keys that look alike inside strings, are fine.
    expect(refused('{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}],"d":"\\"a\\":1,\\"a\\":2"}')).toBe('parsed');
    expect(refused('{"a":{"proto":1},"b":"__proto__"}')).toBe('parsed');
    expect(firstRepeatedKey('[{"k":[1,{"z":1,"z":2}]}]')).toBe('0.k.1.z');
  });

  it('refuses a __proto__ key at any depth, naming it: a schema copying the object would make it the prototype and drop it silently (security probe)', () => {
    const message = 'not a field name any request takes';
    expect(refused('{"action":"buy","__proto__":{"qty":5}}')).toBe(`VALIDATION_FAILED __proto__: __proto__: ${message}`);
    expect(refused('{"stopLoss":{"ticks":10,"__proto__":{"trailing":true}}}')).toBe(`VALIDATION_FAILED stopLoss.__proto__: stopLoss.__proto__: ${message}`);
    expect(refused(String.raw`{"a":[1,{"\u005f_proto__":2}]}`)).toBe(`VALIDATION_FAILED a.1.__proto__: a.1.__proto__: ${message}`);
  });

  it('hasBody looks at Content-Length and chunked encoding', () => {
    expect(hasBody({ 'content-length': '3' })).toBe(true);
    expect(hasBody({ 'content-length': '0' })).toBe(false);
    expect(hasBody({ 'transfer-encoding': 'chunked' })).toBe(true);
    expect(hasBody({})).toBe(false);
  });
});

describe('validate', () => {
  it('lists every invalid field by dotted path, unknown fields one per key', () => {
    try {
      validate(schema, { symbol: 1, qty: -1, takeProfit: { price: 'x', extra: 1 }, stopLos: 2 }, 'body');
      expect.unreachable();
    } catch (err) {
      const e = err as AppError;
      expect(e.code).toBe('VALIDATION_FAILED');
      const paths = (e.extensions['errors'] as { path: string }[]).map((x) => x.path).sort();
      expect(paths).toEqual(['qty', 'stopLos', 'symbol', 'takeProfit.extra', 'takeProfit.price']);
    }
  });

  it('says what a union field takes and what it got, or the failing shape\'s own problem at its path, not "Invalid input" (new-user probe: "tp": null)', () => {
    const scalar = z.union([z.number(), z.string()]);
    const leg = z.union([scalar, z.looseObject({ price: scalar.optional() }), z.array(z.unknown())]);
    const union = z.looseObject({ tp: leg.optional(), qty: scalar.optional() });
    const errorsOf = (value: unknown) => {
      try {
        validate(union, value, 'body');
      } catch (err) {
        return (err as AppError).extensions['errors'];
      }
      return expect.unreachable();
    };
    expect(errorsOf({ tp: null })).toEqual([{ path: 'tp', message: 'Invalid input: expected number, string, object or array, received null' }]);
    expect(errorsOf({ qty: true })).toEqual([{ path: 'qty', message: 'Invalid input: expected number or string, received boolean' }]);
    expect(errorsOf({ tp: { price: false } })).toEqual([{ path: 'tp.price', message: 'Invalid input: expected number or string, received boolean' }]);
  });

  it('repeats at most 100 characters of a name the client made up (a 32 KB unknown field or parameter would come back twice)', () => {
    const long = 'z'.repeat(32_000);
    for (const [value, what] of [[{ [long]: 1 }, 'body'], [{ [long]: '1' }, 'query']] as const) {
      const e = (() => {
        try {
          validate(schema, value, what);
        } catch (err) {
          return err as AppError;
        }
        throw new Error('accepted');
      })();
      expect(JSON.stringify({ detail: e.message, ...e.extensions }).length, what).toBeLessThan(600);
      expect(JSON.stringify(e.extensions)).toContain(`${'z'.repeat(100)}…`);
    }
    expect(JSON.stringify((() => { try { parseJsonBody(Buffer.from(`{"${long}":1,"${long}":2}`), 'application/json', false); } catch (err) { return (err as AppError).extensions; } })()).length).toBeLessThan(400);
  });

  it('lists at most MAX_LISTED_ERRORS problems and counts the rest in errorsOmitted', () => {
    const body = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`x${i}`, 1]));
    try {
      validate(schema, { ...body, qty: 'one' }, 'body');
      expect.unreachable();
    } catch (err) {
      const ext = (err as AppError).extensions as { errors: unknown[]; errorsOmitted: number };
      expect(ext.errors).toHaveLength(MAX_LISTED_ERRORS);
      // symbol missing, qty wrong, 100 unknown
      expect(ext.errors.length + ext.errorsOmitted).toBe(102);
    }
    try {
      validate(schema, { qty: 0 }, 'body');
      expect.unreachable();
    } catch (err) {
      expect((err as AppError).extensions).not.toHaveProperty('errorsOmitted');
    }
  });

  it('prefixes query errors with query.', () => {
    const q = z.strictObject({ limit: z.coerce.number().int().max(500) });
    try {
      validate(q, { limit: '900' }, 'query');
      expect.unreachable();
    } catch (err) {
      expect((err as AppError).extensions['errors']).toEqual([{ path: 'query.limit', message: expect.any(String) }]);
    }
  });

  it('property: arbitrary bytes as a body only ever produce documented 4xx codes or a valid value', () => {
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 200 }).map((a) => Buffer.from(a)), fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? ''))), fc.constantFrom('application/json', 'text/plain', undefined), fc.boolean(), (raw, type, lenient) => {
        const code = codeOf(() => validate(schema, parseJsonBody(raw, type, lenient), 'body'));
        expect([undefined, 'VALIDATION_FAILED', 'UNSUPPORTED_MEDIA_TYPE']).toContain(code);
      }),
    );
  });
});
