-- The records a processed upload wrote, kept until they are scored: uploads processed while more
-- of their kind wait are scored together by one job (src/db/jobs.ts scoreUploadsJob), which reads
-- them here and clears them.
alter table uploads add column record_ids bigint[];
