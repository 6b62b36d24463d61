-- Folds jsonb objects with ||, in the aggregate's order: later keys win. Merging whole objects
-- is much cheaper than expanding them with jsonb_each and re-aggregating key by key.
create aggregate jsonb_merge_agg(jsonb) (sfunc = jsonb_concat, stype = jsonb, initcond = '{}');
