/**
 * Text a person gives a name, a reason or a label: no control characters (terminal escapes,
 * NUL, carriage returns) and no bidirectional overrides (which make a name read as another
 * in a list or a terminal). Descriptions may also hold line breaks and tabs.
 */
export const PLAIN_TEXT = /^[^\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]*$/;
export const PLAIN_TEXT_MESSAGE = 'must not contain control characters or bidirectional overrides';

export const PLAIN_LINES = /^[^\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]*$/;
export const PLAIN_LINES_MESSAGE = 'must not contain control characters (but line breaks and tabs) or bidirectional overrides';
