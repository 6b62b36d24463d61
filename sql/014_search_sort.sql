-- Sorted search pages carry their place in the order as a cursor signed with this key (src/search/sort.ts),
-- so that a forged or altered cursor is refused. One key per database: every serve process reads the same one
-- and accepts the cursors of every other. gen_random_uuid() draws from the server's strong random source;
-- two of them give 244 random bits.
create table service_secrets (
  name text primary key,
  value bytea not null
);
insert into service_secrets (name, value)
values ('search_cursor', decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));
