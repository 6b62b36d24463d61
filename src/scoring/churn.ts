import type { Tx } from '../db/client.ts'

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
// daily inactive churn, its lift at scoring), right after it: not by a trigger, which on Citus would
// run on the worker holding the shard (sql/047). Days are UTC dates.
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
