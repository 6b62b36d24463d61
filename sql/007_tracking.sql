-- The typed check of src/uploads/typecheck.ts (fitsType, isDate) for set-based SQL: tracked
-- values are applied in bulk by the apply_events job, which ignores values of the wrong type.
-- test/tracking.test.ts feeds both the same generated cases.

-- YYYY-MM-DD naming a real calendar day. PostgreSQL has no year 0, JavaScript has (a leap year):
-- it is checked as 2000, which has the same calendar.
create function is_iso_date(s text) returns boolean language plpgsql immutable parallel safe as $$
begin
  if s !~ '^\d{4}-\d{2}-\d{2}$' then return false; end if;
  if left(s, 4) = '0000' then s := '2000' || substr(s, 5); end if;
  return to_char(s::date, 'YYYY-MM-DD') = s;
exception when others then
  return false;
end $$;

-- A JSON null fits every type (it clears the value).
create function fits_type(v jsonb, type text) returns boolean language sql immutable parallel safe as $$
  select case
    when jsonb_typeof(v) = 'null' then true
    when type = 'date' then jsonb_typeof(v) = 'string' and is_iso_date(v #>> '{}')
    else jsonb_typeof(v) = type
  end
$$;
