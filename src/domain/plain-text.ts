/**
 * Text a person gives a name, a reason or a label: no control characters (terminal escapes,
 * NUL, carriage returns), no bidirectional marks or overrides (which make a name read as another
 * in a list or a terminal), no invisible characters, no line or paragraph separators, and no
 * unpaired UTF-16 surrogate (it has no UTF-8 form: stored or echoed it turns into U+FFFD).
 * Descriptions may also hold line breaks and tabs.
 *
 * Invisible means Unicode's default-ignorable and format characters: zero-width spaces and word
 * joiners, U+FEFF, the soft hyphen, the combining grapheme joiner, Hangul fillers, Mongolian
 * selectors, interlinear annotation marks, musical and shorthand format controls, and tag
 * characters (`EVAL1` followed by tags read exactly as `EVAL1`: API probe). Emoji keep what they
 * are made of, and only there: a zero-width joiner or a variation selector after a non-ASCII
 * character (👨‍👩‍👧, ❤️), a keycap (1️⃣), and tag characters inside a flag (🏴 + tags + cancel tag).
 */
const CONTROLS = '\\u0000-\\u001f\\u007f-\\u009f';
/** Controls but tab and line feed. */
const CONTROLS_BUT_LINES = '\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f';
const INVISIBLE =
  '\\u00ad\\u034f\\u061c\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b\\u200c\\u200e\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u3164' +
  '\\ufeff\\uffa0\\ufff0-\\ufffb\\u{110bd}\\u{110cd}\\u{13430}-\\u{1343f}\\u{1bca0}-\\u{1bca3}\\u{1d173}-\\u{1d17a}\\u{e0000}-\\u{e00ff}\\u{e01f0}-\\u{e0fff}\\p{Cs}';
/** What joins emoji (the zero-width joiner, variation selectors) and ideographs (their variation selectors). */
const JOINERS = '\\u200d\\ufe00-\\ufe0f\\u{e0100}-\\u{e01ef}';

function plainText(controls: string): RegExp {
  const refused = `${controls}${INVISIBLE}${JOINERS}`;
  const flag = '\\u{1f3f4}[\\u{e0020}-\\u{e007e}]+\\u{e007f}';
  const keycap = '[0-9#*]\\ufe0f?\\u20e3';
  const joined = `[^${refused}\\u0000-\\u007f][${JOINERS}]+`;
  return new RegExp(`^(?:${flag}|${keycap}|${joined}|[^${refused}])*$`, 'u');
}

export const PLAIN_TEXT = plainText(CONTROLS);
export const PLAIN_TEXT_MESSAGE = 'must not contain control, invisible or bidirectional-override characters, or unpaired surrogates';

export const PLAIN_LINES = plainText(CONTROLS_BUT_LINES);
export const PLAIN_LINES_MESSAGE = 'must not contain control (but line breaks and tabs), invisible or bidirectional-override characters, or unpaired surrogates';

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
