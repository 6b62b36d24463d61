// customer.created envelopes exactly as the interface spec's "Events > Payload" section lays them out.
export const BATCH_SIZE = 1000

export interface CreatedCustomer {
  service_id: number
  external_id: string
  name: string | null
  created_at: string
}

// Fields are copied one by one so that extra row columns never leak into the payload
// and the key order on the wire stays the documented one.
const customerJson = (c: CreatedCustomer) => ({
  service_id: c.service_id,
  external_id: c.external_id,
  name: c.name,
  created_at: c.created_at,
})

const chunk = <T>(items: T[], size: number): T[][] => {
  const chunks: T[][] = []
  for (let i = 0; i < items.length; i += size) chunks.push(items.slice(i, i + size))
  return chunks
}

export const buildCustomerCreatedPayloads = (
  customers: CreatedCustomer[],
  source: string,
  timestamp: string,
): string[] => {
  const batches = chunk(customers, BATCH_SIZE)
  return batches.map((batch, i) =>
    JSON.stringify({
      event: 'customer.created',
      timestamp,
      data: {
        source,
        customers: batch.map(customerJson),
        batch: {
          current_batch: i + 1,
          total_batches: batches.length,
          total_customers: customers.length,
          batch_size: batch.length,
        },
      },
    }),
  )
}
