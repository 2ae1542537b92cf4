SELECT count(*) FROM orders;
SELECT count(*) FROM lineitem
WHERE l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate
  AND l_receiptdate >= date '1994-01-01' AND l_receiptdate < date '1994-01-01' + interval '1 year';
