import { AppError } from './problems.js';

/**
 * Text a person gives a name, a reason or a label: no control characters (terminal escapes,
 * NUL, carriage returns), no bidirectional marks or overrides (which make a name read as another
 * in a list or a terminal), no invisible characters, no line or paragraph separators, and no
 * unpaired UTF-16 surrogate (it has no UTF-8 form: stored or echoed it turns into U+FFFD). A name
 * also needs something to see: only spaces (U+00A0, U+3000, a blank braille cell…) or combining
 * marks is refused.
 * Descriptions may also hold line breaks and tabs.
 *
 * Invisible means Unicode's default-ignorable and format characters and noncharacters: zero-width
 * spaces, U+FEFF, the soft hyphen, the combining grapheme joiner, Hangul fillers, interlinear
 * annotation marks, musical and shorthand format controls, tag characters (`EVAL1` followed by
 * tags read exactly as `EVAL1`: API probe). The joiners that writing needs stay where it needs
 * them: the zero-width joiner and non-joiner, variation selectors and Mongolian selectors, one or
 * two at a time, after a letter or mark of a script other than Latin (Persian, Devanagari,
 * Mongolian, Han) or after an emoji (👨‍👩‍👧, ❤️); keycaps (1️⃣); a flag's tag sequence of a
 * subdivision code (🏴 + gbsct + cancel tag). After a Latin letter, a space or a digit they only hide.
 */
const CONTROLS = '\\u0000-\\u001f\\u007f-\\u009f';
/** Controls but tab and line feed. */
const CONTROLS_BUT_LINES = '\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f';
const INVISIBLE =
  '\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u200b\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164' +
  '\\ufdd0-\\ufdef\\ufeff\\uffa0\\ufff0-\\ufffb\\ufffe\\uffff\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}\\u{16fe4}\\u{1bca0}-\\u{1bca3}' +
  '\\u{1d159}\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e00ff}\\u{e01f0}-\\u{e0fff}\\p{Cs}\\p{Noncharacter_Code_Point}';
/** What joins letters and emoji: zero-width joiner and non-joiner, variation selectors (emoji, Mongolian, ideographic). */
const JOINERS = '\\u180b-\\u180f\\u200c\\u200d\\ufe00-\\ufe0f\\u{e0100}-\\u{e01ef}';

function plainText(controls: string, visible: boolean): RegExp {
  const refused = `${controls}${INVISIBLE}${JOINERS}`;
  const flag = '\\u{1f3f4}[\\u{e0030}-\\u{e0039}\\u{e0061}-\\u{e007a}]{3,6}\\u{e007f}';
  const keycap = '[0-9#*]\\ufe0f?\\u20e3';
  // A letter or mark of a script other than Latin, or an emoji (base or skin tone), then joiners.
  const joinable = `(?![${refused}])(?:(?!\\p{Script=Latin})[\\p{L}\\p{M}]|\\p{Extended_Pictographic}|\\p{Emoji_Modifier})`;
  const joined = `${joinable}[${JOINERS}]{1,2}`;
  // Something to see: a character that is not a space, a blank braille cell or a mark (a lone
  // combining accent draws nothing of its own: fuzz probe).
  const seen = visible ? '(?=[\\s\\S]*[^\\s\\u2800\\p{M}])' : '';
  return new RegExp(`^${seen}(?:${flag}|${keycap}|${joined}|[^${refused}])*$`, 'u');
}

export const PLAIN_TEXT = plainText(CONTROLS, true);
export const PLAIN_TEXT_MESSAGE = 'must show something, and must not contain control, invisible or bidirectional-override characters, or unpaired surrogates';

export const PLAIN_LINES = plainText(CONTROLS_BUT_LINES, false);
export const PLAIN_LINES_MESSAGE = 'must not contain control (but line breaks and tabs), invisible or bidirectional-override characters, or unpaired surrogates';

/**
 * Refuses a name of a stored record (a connection, key, token or strategy) whoever writes it: the
 * API checks at its edge too, and the CLI relies on this (re-probe: a terminal escape and a
 * right-to-left override went into a key name through `keys create`, printed as is).
 */
export function checkRecordName(what: string, name: string, max = 100): void {
  const problem = name.length < 1 || textLength(name) > max ? `must be 1..${max} characters` : PLAIN_TEXT.test(name) ? undefined : PLAIN_TEXT_MESSAGE;
  if (problem) throw new AppError('VALIDATION_FAILED', `${what} name ${problem}`);
}

const SHOWN_ESCAPED = new RegExp(`[${CONTROLS}${INVISIBLE}${JOINERS}]`, 'gu');

/** `text` with every control, invisible or joining character written as \uXXXX (\u{XXXXX} beyond the BMP), cut to `max` characters: safe to echo. */
export function printable(text: string, max = 64): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return cut.replace(SHOWN_ESCAPED, (c) => {
    const code = c.codePointAt(0)!;
    // A lone surrogate's code point is its own unit: four digits either way.
    return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/**
 * Characters of a name as the API documents them (JSON Schema `maxLength`, and zod's checks at the
 * edge): code points, so an emoji is one, not the two UTF-16 units of `String.length`.
 */
export function textLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}
