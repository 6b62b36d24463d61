// The bounds both intakes hold an event to: a tracked event, or a relay message.

// An event's JSON, at most.
export const MAX_EVENT_BYTES = 32 * 1024
// An event's time, from 2000-01-01 up to 2100-01-01 (not included): the lower bound catches the
// usual mistake of sending Unix seconds (1.7e9 ms is January 1970).
export const MIN_TIME = Date.UTC(2000, 0, 1)
export const END_TIME = Date.UTC(2100, 0, 1)

// Whether a JSON text takes more than MAX_EVENT_BYTES of UTF-8. A string takes at most 3 bytes per
// UTF-16 unit: only a long one is measured.
export const overBytes = (text: string) =>
  text.length * 3 > MAX_EVENT_BYTES && Buffer.byteLength(text) > MAX_EVENT_BYTES
