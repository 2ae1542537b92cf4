-- lineitem as l1, l2 and l3
SELECT count(*) FROM supplier;
SELECT count(*) FROM lineitem WHERE l_receiptdate > l_commitdate;
SELECT count(*) FROM lineitem;
SELECT count(*) FROM lineitem WHERE l_receiptdate > l_commitdate;
SELECT count(*) FROM orders WHERE o_orderstatus = 'F';
SELECT count(*) FROM nation WHERE n_name = 'SAUDI ARABIA';
