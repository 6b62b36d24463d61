// PostgreSQL text and jsonb can hold neither NUL nor an unpaired surrogate (JSON.stringify writes
// one as a \ud800 escape, which jsonb refuses).
export const UNSTORABLE = /\0|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
