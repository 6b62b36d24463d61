-- Tag links carry their record's external id, so that a tag filter can walk one tag's records in
-- external-id order, the order of every search page. A page of a tag then reads its first links and
-- their records only; before, the search walked the account's records in that order and probed each
-- one's tags (a 1% tag: 29 ms per page on one account of 1,000,000 customers, now 2.7 ms; with a
-- churn_risk filter beside it 78 ms, now 4.8 ms). A record's external id never changes (records are
-- found and merged by it), and a link goes with its record (the foreign key cascades), so the copy
-- cannot drift. The unique index replaces the (account_id, tag_id, record) one: it serves the same
-- lookups and the tag's foreign-key cascade, and its uniqueness lets the planner read the links as
-- the outer side of a plain join.
alter table customer_tags add column external_id text collate "C";
update customer_tags x set external_id = c.external_id
from customers c where c.account_id = x.account_id and c.service_id = x.customer_id;
alter table customer_tags alter column external_id set not null;
drop index customer_tags_tag;
create unique index customer_tags_tag on customer_tags (account_id, tag_id, external_id);

alter table contact_tags add column external_id text collate "C";
update contact_tags x set external_id = c.external_id
from contacts c where c.account_id = x.account_id and c.service_id = x.contact_id;
alter table contact_tags alter column external_id set not null;
drop index contact_tags_tag;
create unique index contact_tags_tag on contact_tags (account_id, tag_id, external_id);
