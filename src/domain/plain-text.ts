/**
 * Text a person gives a name, a reason or a label: no control characters (terminal escapes,
 * NUL, carriage returns), no bidirectional marks or overrides (which make a name read as another
 * in a list or a terminal), no invisible characters (zero-width spaces, word joiners, U+FEFF)
 * no line or paragraph separators, and no unpaired UTF-16 surrogate (it has no UTF-8 form: stored
 * or echoed it turns into U+FFFD). The zero-width joiner stays: emoji sequences use it.
 * Descriptions may also hold line breaks and tabs.
 */
export const PLAIN_TEXT = /^[^\u0000-\u001f\u007f-\u009f\u061c\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\p{Cs}]*$/u;
export const PLAIN_TEXT_MESSAGE = 'must not contain control, invisible or bidirectional-override characters, or unpaired surrogates';

export const PLAIN_LINES = /^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\p{Cs}]*$/u;
export const PLAIN_LINES_MESSAGE = 'must not contain control (but line breaks and tabs), invisible or bidirectional-override characters, or unpaired surrogates';

/** `text` with every character PLAIN_TEXT refuses written as \uXXXX, cut to `max` characters: safe to echo. */
export function printable(text: string, max = 64): string {
  const cut = text.length > max ? `${text.slice(0, max)}…` : text;
  return cut.replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200c\u200e\u200f\u2028-\u202e\u2060-\u2069\ufeff\p{Cs}]/gu, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
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
