SELECT count(*) FROM part WHERE p_name LIKE '%green%';
SELECT count(*) FROM supplier;
SELECT count(*) FROM lineitem;
SELECT count(*) FROM partsupp;
SELECT count(*) FROM orders;
SELECT count(*) FROM nation;
