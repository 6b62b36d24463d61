import type { Sql, Tx } from '../db/client.ts'
import { PAST_DAYS } from '../search/fields.ts'

// A change of a customer's is_churned, for customer_churn_events (sql/036): the "This week" report
// lists reactivations from them (a reactivation clears the churn and leaves no other trace).
interface ChurnChange {
  service_id: number
  churned: boolean
  // A churn's date (today when null); a reactivation is dated today.
  churned_date?: string | null
  // A churn's reason; for a reactivation, the reason of the churn it ends.
  reason: string | null
}

// Inserted by the transaction of each statement that changes is_churned (a single-record write, the
// daily inactive churn, its lift at scoring), right after it: not by a trigger, which on Citus
// would run on the worker holding the shard (sql/047). Days are UTC dates.
export const recordChurnEvents = (tx: Tx, accountId: number, changes: ChurnChange[]) =>
  changes.length === 0
    ? Promise.resolve()
    : tx`
  insert into customer_churn_events (account_id, customer_id, churned, day, reason)
  select ${accountId}::bigint, c.service_id, c.churned,
    case when c.churned then coalesce(c.churned_date, (now() at time zone 'utc')::date)
      else (now() at time zone 'utc')::date end,
    c.reason
  from json_to_recordset(${JSON.stringify(changes)}::text::json)
    as c(service_id bigint, churned boolean, churned_date date, reason text)`.then(() => undefined)

// Writes the probabilities (null: no model) of the customers as of `day`, creating their score rows
// where they have none; a row whose probability is unchanged is not written. A change is kept in
// the row's history (sql/052) as the day's entry, the day's last write replacing an earlier one
// of the same day (or of a later day, should the clock step back: the dates stay in order). The
// history keeps what "This week" reads: the entries after `day` - HISTORY_DAYS and the latest
// before them (k, found by width_bucket's binary search; 1 when there is none).
const HISTORY_DAYS = Math.max(...PAST_DAYS)
export const writeProbabilities = (
  tx: Sql | Tx,
  accountId: number,
  ids: number[],
  probabilities: (number | null)[],
  day: string,
) => {
  if (ids.length === 0) return Promise.resolve()
  // The SET reads the day from the row it would have inserted, and the days back as SQL text:
  // Citus deparses an upsert's SET with its parameters untyped.
  const [dates, history] = [
    tx`customer_scores.churn_history_dates`,
    tx`customer_scores.churn_history`,
  ]
  const today = tx`excluded.churn_history_dates[1]`
  const k = tx`greatest(1, width_bucket(${today} - ${tx.unsafe(String(HISTORY_DAYS))}, ${dates}))`
  const sameDay = tx`${dates}[cardinality(${dates})] >= ${today}`
  return tx`
    insert into customer_scores (account_id, customer_id, external_id, churn_probability,
      churn_history_dates,
      churn_history)
    select ${accountId}, c.service_id, c.external_id, u.p, array[${day}::date], array[u.p]
    from unnest(${ids}::bigint[], ${probabilities as number[]}::float8[]) as u(id, p)
    join customers c on c.account_id = ${accountId} and c.service_id = u.id
    on conflict (account_id, customer_id) do update
      set churn_probability = excluded.churn_probability,
      churn_history_dates = case when ${sameDay} then ${dates}[${k}:]
        else ${dates}[${k}:] || ${today} end,
      churn_history = case when ${sameDay} then ${history}[${k}:cardinality(${history}) - 1]
        else ${history}[${k}:] end
        || excluded.churn_probability
      where customer_scores.churn_probability is distinct from excluded.churn_probability`.then(
    () => undefined,
  )
}
