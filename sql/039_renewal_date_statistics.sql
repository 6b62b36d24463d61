-- The "This week" report's renewals (src/insights/week.ts) filter on attributes->>'renewal_date',
-- whose selectivity the planner otherwise guesses (0.5% of the rows: 498 of 100,000, where 22,750
-- renewed in the bench's 90 days), and then probes customer_scores once per renewing customer instead
-- of hashing it. Statistics on the expression (gathered by the next analyze, no index to maintain on
-- every write) give the planner the real share; an index on it did not pay: a quarter of the
-- customers renewing within 90 days is read faster by the scan (docs/benchmarks.md, "This week").
create statistics customers_renewal_date on (attributes ->> 'renewal_date') from customers;
