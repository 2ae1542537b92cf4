SELECT count(*) FROM orders
WHERE o_orderdate >= date '1993-07-01' AND o_orderdate < date '1993-07-01' + interval '3 months';
SELECT count(*) FROM lineitem WHERE l_commitdate < l_receiptdate;
