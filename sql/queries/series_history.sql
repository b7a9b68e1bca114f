-- series_history: per-device medians of one series over the newest `limit` accepted runs of a
-- suite, newest run first (the table behind a trend plot; Store.series_history pools the samples).
-- params: suite, kind, pool, case_name, metric, limit
WITH points AS (
    SELECT r.run_key, r.sha, r.started_at, s.device, res.unit, res.median, res.n,
           DENSE_RANK() OVER (ORDER BY r.started_at DESC, r.id DESC) AS age
    FROM results res
    JOIN shards s ON s.id = res.shard_id
    JOIN runs r ON r.id = s.run_id
    WHERE r.suite = :suite
      AND r.kind = :kind
      AND r.accepted = TRUE
      AND s.pool = :pool
      AND s.status = 'ok'
      AND res."case" = :case_name
      AND res.metric = :metric
)
SELECT run_key, sha, started_at, device, unit, median, n
FROM points
WHERE age <= :limit
ORDER BY age, device
