-- The keys an upload dropped, by name (issue 33): [{key, count, did_you_mean}], written when the
-- upload is received. Null for uploads received before this column, which answer [].
alter table uploads add column dropped_key_names jsonb;
