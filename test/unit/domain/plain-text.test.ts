import { describe, expect, it } from 'vitest';
import { PLAIN_LINES, PLAIN_TEXT, printable } from '../../../src/domain/plain-text.js';

describe('plain text (names, labels, reasons)', () => {
  it('refuses invisible characters that make a name read as another (API probe: EVAL1 plus tag characters was accepted and shown as EVAL1)', () => {
    const invisible = [
      '\u00ad', // soft hyphen
      '\u034f', // combining grapheme joiner
      '\u115f', '\u1160', '\u3164', '\uffa0', // Hangul fillers
      '\u180e', '\u180b', // Mongolian vowel separator, free variation selector
      '\u2061', '\u206f', // invisible operators, nominal digit shapes
      '\ufff9', '\ufffb', // interlinear annotation
      '\u{1d173}', // musical begin beam
      '\u{1bca0}', // shorthand format letter overlap
      '\u{e0001}', '\u{e0041}', // language tag, tag letter A
      '\u200b', '\ufeff', '\u202e', '\u2066', '\u061c', // as before
    ];
    for (const c of invisible) {
      expect(PLAIN_TEXT.test(`EVAL${c}1`), `U+${c.codePointAt(0)!.toString(16)}`).toBe(false);
      expect(PLAIN_LINES.test(`EVAL${c}1`), `U+${c.codePointAt(0)!.toString(16)}`).toBe(false);
    }
    // Joiners and selectors only join emoji: after an ASCII letter they hide.
    for (const hidden of ['EVAL\u200d1', 'EVAL1\ufe0f', 'A\ufe0e', '\u200dEVAL1', '\ufe0f']) expect(PLAIN_TEXT.test(hidden), JSON.stringify(hidden)).toBe(false);
    // Tags outside a flag sequence, or a flag never closed.
    expect(PLAIN_TEXT.test('\u{1f3f4}\u{e0067}\u{e0062}')).toBe(false);
    expect(PLAIN_TEXT.test('x\u{e0067}\u{e007f}')).toBe(false);
  });

  it('refuses what the re-probe still got through: joiners after a Latin letter or a space, text hidden in a flag, blank-only names, noncharacters', () => {
    const tags = (text: string) => [...text].map((c) => String.fromCodePoint(0xe0000 + c.codePointAt(0)!)).join('');
    for (const hidden of [
      'Café\u200d',
      `EVAL1\u00a0${'\u200d'.repeat(40)}`,
      `EVAL1\u{1f3f4}${tags('ignorethis')}\u{e007f}`, // a "flag" spelling hidden text
      '\u3164\u200d', // a Hangul filler is a letter, but an invisible one
      '\u2800', '\u2800\u2800', '\u00a0', '\u3000', ' ', '\u0301', ' \u0301', '\u0301\u0308', // nothing to see
      'a\u{16fe4}b', 'a\u{1d159}b', 'a\uffffb', 'a\ufdd0b', // fillers, null notehead, noncharacters
      '\u0928\u200d\u200d\u200d', // three joiners in a row
    ]) expect(PLAIN_TEXT.test(hidden), JSON.stringify(hidden)).toBe(false);
    // Every one of the 66 noncharacters, beyond the BMP too (fuzz probe: U+1FFFE..U+10FFFF were accepted).
    const nonchars = [...Array.from({ length: 32 }, (_, i) => 0xfdd0 + i), ...Array.from({ length: 17 }, (_, plane) => [plane * 0x10000 + 0xfffe, plane * 0x10000 + 0xffff]).flat()];
    expect(nonchars).toHaveLength(66);
    for (const c of nonchars) expect(PLAIN_TEXT.test(`a${String.fromCodePoint(c)}b`), c.toString(16)).toBe(false);
  });

  it('keeps the joiners that ordinary writing needs (re-probe: Persian, Hindi, Kannada and Mongolian were refused)', () => {
    for (const text of [
      'می\u200cخواهم', // Persian, zero-width non-joiner
      'क्\u200dष', // Devanagari, zero-width joiner after a virama
      'ಕನ್ನಡ\u200c', // Kannada
      '\u182d\u180b\u1822', // Mongolian free variation selector
      '\u1820\u180e\u1821', // Mongolian vowel separator
      '🏳️\u200d🌈', // rainbow flag: VS16 + ZWJ
      '👩🏽\u200d💻', // skin tone, then ZWJ
      '©\ufe0f', // a symbol emoji with VS16
    ]) expect(PLAIN_TEXT.test(text), text).toBe(true);
  });

  it('keeps what emoji are made of, and every visible script', () => {
    const fine = [
      'Scalp — ES 📈 «long» 👨‍👩‍👧', // ZWJ family
      'love ❤️ and ❤️‍🔥', // VS16, VS16 + ZWJ
      'level 1️⃣ #️⃣', // keycaps
      'Scotland 🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}', // flag tag sequence
      '日本語 العربية עברית Ελληνικά हिन्दी', // scripts, including ones with combining marks
      '葛\u{e0100}', // an ideographic variation sequence
    ];
    for (const text of fine) expect(PLAIN_TEXT.test(text), text).toBe(true);
    expect(PLAIN_LINES.test('line one\n\tline two')).toBe(true);
    expect(PLAIN_TEXT.test('line one\nline two')).toBe(false);
  });

  it('printable escapes what it refuses, beyond the BMP too', () => {
    expect(printable('a\u001b[31m')).toBe('a\\u001b[31m');
    expect(printable('EVAL1\u{e0041}')).toBe('EVAL1\\u{e0041}');
    expect(printable('x\u00ady')).toBe('x\\u00ady');
  });
});
