-- The dashboard's filters by kind and by tag (a tenant, say) among finished jobs, where
-- almost every job ends up. Without them, one tenant of 1,000 or one kind of 120 is found
-- by walking the archive newest first, past a thousand rows for each match: 0.6-1.8 s at
-- 5 M jobs (docs/benchmarks.md, "The dashboard on real data").
--
-- Both are on the archive only, never on `jobs`, and both are partial: a job pays for
-- them, once, when it is archived, and only if it has tags, or failed or was cancelled.
-- A full index on the archive's kinds cost every successful job an entry: 18-25 % more
-- Postgres CPU per job and 15 % fewer jobs per second in paired burn-downs
-- (docs/benchmarks.md); these two cost the burn-down nothing measurable.
--
-- jobs::list: a kind's failed or cancelled jobs (the ones an operator looks for by kind),
-- counted from the index alone, in a created window a range of it. A kind's completed
-- jobs are found by walking the archive newest first (one row in 120 matches for a kind
-- of 120).
--
-- Building them blocks writes to the archive for as long as it takes (seconds per
-- million rows). On a large archive, build them first without blocking, under the same
-- names, and this migration leaves them as they are:
--   CREATE INDEX CONCURRENTLY jobs_archive_kind_idx ON jobs_archive (kind, created_at, id) WHERE state IN ('discarded', 'cancelled');
--   CREATE INDEX CONCURRENTLY jobs_archive_tags_idx ON jobs_archive USING gin (tags) WHERE tags <> '{}';
CREATE INDEX IF NOT EXISTS jobs_archive_kind_idx ON jobs_archive (kind, created_at, id)
    WHERE state IN ('discarded', 'cancelled');
-- jobs::list: the jobs holding a tag. Only jobs with tags have an entry: untagged jobs cost
-- nothing (the list's statement repeats `tags <> '{}'` so that the planner can use it).
CREATE INDEX IF NOT EXISTS jobs_archive_tags_idx ON jobs_archive USING gin (tags) WHERE tags <> '{}';
