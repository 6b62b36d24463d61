-- The one date rule (src/dates.ts): YYYY-MM-DD naming a real calendar day in the years 0001-9999.
-- 007 checked a year 0000 as 2000 and so took dates PostgreSQL's date cannot hold.
create or replace function is_iso_date(s text) returns boolean language plpgsql immutable parallel safe as $$
begin
  if s !~ '^\d{4}-\d{2}-\d{2}$' or left(s, 4) = '0000' then return false; end if;
  return to_char(s::date, 'YYYY-MM-DD') = s;
exception when others then
  return false;
end $$;
