-- latest_runs: the newest run of every suite of one kind, with its shard and result counts.
-- params: kind ("nightly" | "pr" | "ab")
-- Portable: SQLite >= 3.25 and PostgreSQL (window functions, no JSON operators).
WITH ranked AS (
    SELECT r.id, r.suite, r.kind, r.run_key, r.sha, r.branch, r.status, r.accepted,
           r.started_at, r.finished_at,
           ROW_NUMBER() OVER (PARTITION BY r.suite ORDER BY r.started_at DESC, r.id DESC) AS rn
    FROM runs r
    WHERE r.kind = :kind
)
SELECT ranked.suite, ranked.kind, ranked.run_key, ranked.sha, ranked.branch, ranked.status,
       ranked.accepted, ranked.started_at, ranked.finished_at,
       (SELECT COUNT(*) FROM shards s WHERE s.run_id = ranked.id) AS shards,
       (SELECT COUNT(*) FROM shards s WHERE s.run_id = ranked.id AND s.status = 'ok') AS ok_shards,
       (SELECT COUNT(*) FROM results res JOIN shards s ON s.id = res.shard_id
         WHERE s.run_id = ranked.id) AS results
FROM ranked
WHERE ranked.rn = 1
ORDER BY ranked.suite
