import { Counter } from 'prom-client'
import { registry } from '../../metrics.ts'

// The relay's counters, registered from here in the one registry (their public names keep the
// word segment): messages received by this process by type ('unknown' for no known type,
// 'duplicate' for a messageId already received), and what its apply jobs made of them.
export const relayReceived = new Counter({
  name: 'service_segment_messages_received_total',
  help: 'Segment messages received, by type (unknown: no known type; duplicate: a messageId already received).',
  labelNames: ['type'] as const,
  registers: [registry],
})
export const relayApplied = new Counter({
  name: 'service_segment_messages_total',
  help: 'Segment messages handled by the apply job, by type and outcome (applied, ignored, pending, dropped).',
  labelNames: ['type', 'outcome'] as const,
  registers: [registry],
})
export const relayDropped = new Counter({
  name: 'service_segment_dropped_total',
  help: 'Segment messages dropped (or traits dropped: invalid_trait), by reason (docs/api.md).',
  labelNames: ['reason'] as const,
  registers: [registry],
})
