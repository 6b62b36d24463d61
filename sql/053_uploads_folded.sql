-- An upload's items are stored folded into one record each (src/uploads/fold.ts), so that its merge
-- reads records and snapshots without aggregating them. The uploads received before, still to be
-- processed or kept for a retry, are folded here the same way: by external id, later items
-- winning, attributes and each date's values merged in item order (nulls kept), metrics each one's
-- latest non-null value. A function of the row's own columns, so that Citus runs it on each shard.
create function fold_upload_items(kind text, items jsonb) returns jsonb
language sql immutable as $$
  with i as (
    select i.ord - 1 as ord, i.item,
      i.item->>(case kind when 'contacts' then 'contact_external_id' else 'external_id' end)
        as external_id
    from jsonb_array_elements(items) with ordinality as i(item, ord)
  ), v as (
    select i.external_id, m->>'date' as date, jsonb_merge_agg((m - 'date') order by i.ord) as vals
    from i cross join jsonb_array_elements(i.item->'metrics') m
    group by 1, 2
  ), s as (
    select external_id, jsonb_object_agg(date, vals) as snapshots,
      jsonb_merge_agg(jsonb_strip_nulls(vals) order by date collate "C") as metrics
    from v group by 1
  ), r as (
    select i.external_id, min(i.ord) as first_ord, max(i.ord) as item,
      (array_agg(i.item->>(case kind when 'contacts' then 'contact_name' else 'name' end)
        order by i.ord desc))[1] as name,
      (array_agg(i.item->>'owner_email' order by i.ord desc)
        filter (where i.item->>'owner_email' is not null))[1] as owner_email,
      (array_agg(i.item->>'customer_external_id' order by i.ord desc))[1] as customer_external_id,
      jsonb_merge_agg(i.item->'attributes' order by i.ord)
        filter (where i.item ? 'attributes') as attributes
    from i group by 1
  )
  select coalesce(jsonb_agg(jsonb_build_object('external_id', r.external_id, 'name', r.name,
      'owner_email', r.owner_email, 'customer_external_id', r.customer_external_id,
      'attributes', r.attributes, 'metrics', coalesce(s.metrics, '{}'),
      'snapshots', coalesce(s.snapshots, '{}'), 'first_ord', r.first_ord, 'item', r.item)
    order by r.first_ord), '[]')
  from r left join s using (external_id)
$$;

update uploads set items = fold_upload_items(kind, items) where items is not null;

drop function fold_upload_items(text, jsonb);
