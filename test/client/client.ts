// A client as a user of the API writes one: types generated from the live /openapi.json by
// openapi-typescript (into ./generated, by test/client.test.ts), calls made with openapi-fetch.
// The type assertions fail the typecheck if any answer is typed never or unknown.
import createClient from 'openapi-fetch'
import type { components, paths } from './generated/schema.ts'

type Known<T> = unknown extends T ? false : [T] extends [never] ? false : true
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
// biome-ignore lint/correctness/noUnusedVariables: T is the assertion, checked where it is given
const typed = <T extends true>() => {}

type Customer = components['schemas']['Customer']
type Problem = components['schemas']['ProblemDetails']

export const run = async (
  baseUrl: string,
  serviceKey: string,
  adminToken: string,
  accountId: number,
) => {
  const api = createClient<paths>({ baseUrl, headers: { 'service-key': serviceKey } })
  const admin = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${adminToken}` } })

  const upload = await api.POST('/api/v1/customers', {
    body: {
      customers: [
        {
          external_id: 'gen-1',
          name: 'Generated',
          attributes: { country: 'US' },
          metrics: [{ date: '2026-11-01', logins: 30 }],
        },
      ],
    },
  })
  typed<Known<NonNullable<typeof upload.data>>>()
  typed<Same<NonNullable<typeof upload.data>['upload_id'], number>>()
  typed<Same<NonNullable<typeof upload.error>, Problem>>()
  if (!upload.data) throw new Error(JSON.stringify(upload.error))

  let status = await api.GET('/api/v1/uploads/{upload_id}', {
    params: { path: { upload_id: upload.data.upload_id } },
  })
  typed<
    Same<
      NonNullable<typeof status.data>['status'],
      'received' | 'processing' | 'processed' | 'failed'
    >
  >()
  for (
    let i = 0;
    i < 300 && status.data?.scored_at == null && status.data?.status !== 'failed';
    i++
  ) {
    await new Promise((r) => setTimeout(r, 100))
    status = await api.GET('/api/v1/uploads/{upload_id}', {
      params: { path: { upload_id: upload.data.upload_id } },
    })
  }

  const search = await api.POST('/api/v1/customers/search', {
    body: {
      filters: [{ propertyName: 'country', operator: 'EQ', value: 'US' }],
      properties: ['country'],
    },
  })
  typed<Known<NonNullable<typeof search.data>>>()
  typed<Same<NonNullable<typeof search.data>['results'][number], Customer>>()
  typed<Same<Customer['upsell_score'], number | null>>()
  typed<Same<Customer['engagementscore_trend'], { [date: string]: number } | null>>()

  const customer = await api.GET('/api/v1/customer/{external_id}', {
    params: { path: { external_id: 'gen-1' } },
  })
  typed<Known<NonNullable<typeof customer.data>>>()
  typed<
    Known<
      NonNullable<NonNullable<typeof customer.data>['score_explanation']>['risk_drivers'][number]
    >
  >()

  // The body type names exactly the keys the service takes; a typo sent anyway gets a 400.
  type SearchBody = NonNullable<
    paths['/api/v1/customers/search']['post']['requestBody']
  >['content']['application/json']
  typed<
    Same<
      keyof SearchBody,
      'filters' | 'where' | 'properties' | 'limit' | 'after' | 'count' | 'sort'
    >
  >()
  const typo = await api.POST('/api/v1/customers/search', { body: { filter: [] } as never })

  const hook = await admin.POST('/admin/v1/accounts/{id}/webhooks', {
    params: { path: { id: accountId } },
    body: { url: 'https://hooks.example.net/customers', events: ['customer.created'] },
  })
  typed<Known<NonNullable<typeof hook.data>>>()
  typed<Same<NonNullable<typeof hook.data>['secret'], string>>()

  return {
    upload: upload.data,
    status: status.data,
    search: search.data,
    customer: customer.data,
    typo: { status: typo.response.status, error: typo.error },
    hook: { status: hook.response.status, data: hook.data, error: hook.error },
  }
}
