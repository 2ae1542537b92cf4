-- Q2: part, supplier, partsupp, nation, region, each read once with its own conditions
SELECT count(*) FROM part WHERE p_size = 15 AND p_type LIKE '%BRASS';
SELECT count(*) FROM supplier;
SELECT count(*) FROM partsupp;
SELECT count(*) FROM nation;
SELECT count(*) FROM region WHERE r_name = 'EUROPE';
