-- The fold starts from its first object instead of concatenating it onto '{}': jsonb_concat is
-- strict, so PostgreSQL takes the first input as the state as it is. A group of one object (every
-- (record, date) of an upload without duplicates) costs no concatenation at all: staging the values
-- of an upload of 1000 customers x 12 took 39-40 instead of 49-52 ms of backend CPU. An empty group
-- now folds to NULL rather than '{}'; every caller folds at least one object, or coalesces.
create or replace aggregate jsonb_merge_agg(jsonb) (sfunc = jsonb_concat, stype = jsonb);
