-- open_regressions: the flagged rows (potential or regression) of one run's compare table,
-- worst first.
-- params: run_key
SELECT c.pool, c."case", c.metric, c.unit, c.verdict, c.change_pct, c.worse_pct,
       c.threshold_pct, c.base_run_key, c.base_sha, c.note
FROM comparisons c
JOIN runs r ON r.id = c.run_id
WHERE r.run_key = :run_key
  AND c.verdict IN ('potential', 'regression')
ORDER BY CASE WHEN c.verdict = 'regression' THEN 0 ELSE 1 END,
         CASE WHEN c.worse_pct IS NULL THEN 1 ELSE 0 END,
         c.worse_pct DESC, c.pool, c."case", c.metric
