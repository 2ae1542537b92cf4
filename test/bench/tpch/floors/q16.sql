SELECT count(*) FROM partsupp;
SELECT count(*) FROM part
WHERE p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%' AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9);
SELECT count(*) FROM supplier WHERE s_comment LIKE '%Customer%Complaints%';
