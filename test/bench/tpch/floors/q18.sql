-- the subquery's aggregate of lineitem whole (every order is a candidate:
-- nothing can drop its rows), then lineitem, orders and customer for the join
SELECT count(*) FROM (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey
                      HAVING sum(l_quantity) > 300) AS big_orders;
SELECT count(*) FROM lineitem;
SELECT count(*) FROM orders;
SELECT count(*) FROM customer;
