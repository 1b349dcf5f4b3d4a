//! Plan tests: the claim and its read-back stay on `jobs_claim_idx`, the claim in claim
//! order (no sort of the queue) and the read-back on the claim's own token, whatever the
//! statistics say.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::{AsyncMysqlConnection, RunQueryDsl, SimpleAsyncConnection};
use jobs_driver::{JobClaimParams, NewJob};

use crate::jobs::claim::{CLAIM, READ_BACK, claim};
use crate::jobs::insert::insert_many;
use crate::testing::TestDatabase;

#[derive(QueryableByName)]
struct Plan {
    #[diesel(sql_type = Text, column_name = "EXPLAIN")]
    json: String,
}

/// `EXPLAIN FORMAT=JSON` of `sql` with its `$n` parameters replaced by `values` (`$1`
/// first).
async fn explain(conn: &mut AsyncMysqlConnection, sql: &str, values: &[&str]) -> String {
    let mut sql = sql.to_owned();
    // The highest number first, so that `$1` does not match the start of `$10`.
    for (n, value) in values.iter().enumerate().rev() {
        sql = sql.replace(&format!("${}", n + 1), value);
    }
    // MySQL 8.3 and later write a second JSON format by default; the first is MariaDB's
    // and older MySQL's (the variable does not exist there).
    let _ = conn.batch_execute("SET SESSION explain_json_format_version = 1").await;
    let plan: Plan =
        diesel::sql_query(format!("EXPLAIN FORMAT=JSON {sql}")).get_result(conn).await.expect("explain");
    plan.json
}

/// Whether `plan` sorts rows: MariaDB writes a `filesort` step, MySQL a flag on each table.
fn sorts(plan: &str) -> bool {
    plan.contains("\"filesort\"") || plan.contains("\"using_filesort\": true")
}

/// 20,000 available jobs in `plans`, 5,000 in `other`, and 300 of `plans` running under
/// three claims; returns a connection and the first claim's token.
async fn claimed_queue(db: &TestDatabase) -> (AsyncMysqlConnection, i64) {
    let mut conn = db.connect().await.expect("connect");
    for (queue, batches) in [("plans", 20), ("other", 5)] {
        let batch: Vec<NewJob> = (0..1_000).map(|_| NewJob::new("plan.job", queue, "{}")).collect();
        for _ in 0..batches {
            insert_many(&mut conn, &batch, None).await.expect("insert");
        }
    }
    for _ in 0..3 {
        let params = JobClaimParams {
            queue: "plans",
            limit: 100,
            node: "planner",
            now: None,
            recurring_size: false,
            limited: false,
            declared: Default::default(),
            ended: &[],
        };
        assert_eq!(claim(&mut conn, params).await.expect("claim").len(), 100);
    }
    #[derive(QueryableByName)]
    struct Token {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        running_token: i64,
    }
    let token: Token =
        diesel::sql_query("SELECT running_token FROM jobs WHERE state = 'running' ORDER BY id LIMIT 1")
            .get_result(&mut conn)
            .await
            .expect("a running job");
    conn.batch_execute("ANALYZE TABLE jobs").await.expect("analyze");
    (conn, token.running_token)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_reads_its_queue_in_claim_order_and_reads_back_only_its_rows() {
    let db = TestDatabase::new().await.expect("database");
    let (mut conn, token) = claimed_queue(&db).await;

    let plan = explain(&mut conn, CLAIM, &["'plans'", "100", "'planner'", "NULL", "42"]).await;
    assert!(plan.contains("\"key\": \"jobs_claim_idx\""), "the claim leaves its index:\n{plan}");
    assert!(!sorts(&plan), "the claim sorts the queue:\n{plan}");

    let plan = explain(&mut conn, READ_BACK, &["'plans'", &token.to_string()]).await;
    assert!(plan.contains("\"key\": \"jobs_claim_idx\""), "the read-back leaves the claim index:\n{plan}");
    assert!(
        plan.contains("\"running_token\""),
        "the read-back does not look up its token in the index (it reads every running job):\n{plan}"
    );
    let sql = READ_BACK.replace("$1", "'plans'").replace("$2", &token.to_string());
    let read: Vec<crate::rows::Id> = diesel::sql_query(sql).load(&mut conn).await.expect("read back");
    assert_eq!(read.len(), 100, "one claim's rows");
}

/// The tables `plan` reads whole (`"access_type": "ALL"`), by name or alias.
fn full_scans(plan: &str) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                if map.get("access_type").and_then(|a| a.as_str()) == Some("ALL")
                    && let Some(name) = map.get("table_name").and_then(|n| n.as_str())
                {
                    out.push(name.to_owned());
                }
                map.values().for_each(|v| walk(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&serde_json::from_str(plan).unwrap_or_default(), &mut out);
    out
}

/// The workflow statements find their rows by key: a settle reads the rows of the jobs it
/// settles, and the settler's sweep reads the unsettled edges' index and looks each
/// dependency up by its key, never reading the finished jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflow_statements_read_by_key() {
    use crate::workflows::statements::{
        DEPENDENCY_STATES, DEPENDENTS_SETTLED, DEPENDENTS_UNSETTLED, EDGES_UNSETTLED,
        FINISHED_WITH_UNSETTLED, LOCK, LOCK_DEPENDENCIES, SET_OUTCOME, SETTLED_EDGES_INTO,
    };
    let db = TestDatabase::new().await.expect("database");
    let (mut conn, _) = claimed_queue(&db).await;
    conn.batch_execute(
        "INSERT INTO job_dependencies (depends_on, job_id, kind, needs, outcome)
         SELECT id, id + 1, 'plan.job', 'completed', IF(id % 4 = 0, NULL, 'completed') FROM jobs;
         ANALYZE TABLE jobs, job_dependencies",
    )
    .await
    .expect("edges");
    let scan = explain(&mut conn, "SELECT id FROM jobs WHERE args = 'x'", &[]).await;
    assert_eq!(full_scans(&scan), ["jobs"], "the check sees a scan:\n{scan}");
    for (name, sql, values) in [
        ("sweep", FINISHED_WITH_UNSETTLED, vec!["0", "1000"]),
        ("dependents", DEPENDENTS_UNSETTLED, vec!["'[4, 8]'", "1000"]),
        ("settled dependents", DEPENDENTS_SETTLED, vec!["'[5, 9]'", "1000"]),
        ("states", DEPENDENCY_STATES, vec!["'[4, 8]'"]),
        ("dependencies locked", LOCK_DEPENDENCIES[0], vec!["'[4, 8]'"]),
        ("locked", LOCK[0], vec!["'[5, 9]'"]),
        ("locked, skipping", LOCK[1], vec!["'[5, 9]'"]),
        ("settled edges into", SETTLED_EDGES_INTO, vec!["'[5, 9]'"]),
        ("edges", EDGES_UNSETTLED, vec!["'[4, 8]'", "'[5, 9]'"]),
        ("outcome", SET_OUTCOME, vec!["'[[4, 5], [8, 9]]'", "'completed'", "NULL"]),
    ] {
        let plan = explain(&mut conn, sql, &values).await;
        // In the sweep, `d` is the derived list of dependencies (read whole, as it should).
        let watched: &[&str] = if name == "sweep" {
            &["jobs", "j", "job_dependencies"]
        } else {
            &["jobs", "j", "job_dependencies", "d"]
        };
        let scanned: Vec<String> =
            full_scans(&plan).into_iter().filter(|t| watched.contains(&t.as_str())).collect();
        assert!(scanned.is_empty(), "{name} reads {scanned:?} whole:\n{plan}");
    }
}

/// A per-key claim's statements: the keys are listed by a walk of the index (one probe per
/// key, not a read of every available job), each key's jobs are taken from
/// `jobs_partition_idx` in claim order, and running jobs are counted per key there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_key_statements_read_one_entry_per_key() {
    use crate::queue_limits::{CLAIM_KEY, KEYS_AFTER, RUNNING_BY_KEY};
    let db = TestDatabase::new().await.expect("database");
    let mut conn = db.connect().await.expect("connect");
    for round in 0..20 {
        let batch: Vec<NewJob> = (0..1_000)
            .map(|i| {
                let mut job = NewJob::new("plan.job", "keyed", "{}");
                let key = if round < 10 { "hot".to_owned() } else { format!("customer_{i:04}") };
                job.meta = serde_json::json!({ "_partition_key": key }).to_string().into();
                job
            })
            .collect();
        insert_many(&mut conn, &batch, None).await.expect("insert");
    }
    conn.batch_execute("ANALYZE TABLE jobs").await.expect("analyze");

    let plan = explain(&mut conn, KEYS_AFTER, &["'keyed'", "''", "100"]).await;
    assert!(plan.contains("\"key\": \"jobs_partition_idx\""), "the keys' walk leaves its index:\n{plan}");
    // (Its one sort is of the walk's own rows, by step: at most a claim's worth.)
    assert_eq!(
        full_scans(&plan).iter().filter(|t| t.as_str() != "k" && !t.starts_with('<')).count(),
        0,
        "{plan}"
    );
    // Walked for real: the busy key's 10,000 jobs are passed in one step.
    let sql = KEYS_AFTER.replace("$1", "'keyed'").replace("$2", "''").replace("$3", "900");
    #[derive(QueryableByName)]
    struct Key {
        #[diesel(sql_type = Text)]
        pkey: String,
    }
    let keys: Vec<Key> = diesel::sql_query(sql).load(&mut conn).await.expect("walk");
    assert_eq!(keys.len(), 900);
    assert_eq!((keys[0].pkey.as_str(), keys[899].pkey.as_str()), ("customer_0000", "customer_0899"));
    let plan = explain(&mut conn, CLAIM_KEY, &["'keyed'", "10", "'planner'", "NULL", "42", "'hot'"]).await;
    assert!(plan.contains("\"key\": \"jobs_partition_idx\""), "a key's claim leaves its index:\n{plan}");
    assert!(!sorts(&plan), "a key's claim sorts its jobs:\n{plan}");
    // The node's ended runs ($2) are a list the statement reads whole (JSON_TABLE `e`).
    let plan = explain(&mut conn, RUNNING_BY_KEY, &["'keyed'", "'[[1,1],[2,1]]'"]).await;
    let scans: Vec<String> = full_scans(&plan).into_iter().filter(|t| t != "e").collect();
    assert!(scans.is_empty(), "counting the running jobs reads the table:\n{plan}");
}
