//! A per-key claim's statements stay on `jobs_partition_idx`: the keys' walk probes it once
//! per key (never reading a busy key's jobs), and each key's share is taken from it in
//! claim order.

use diesel::QueryableByName;
use diesel::sql_types::Text;
use diesel_async::RunQueryDsl;
use jobs_driver::NewJob;

use super::plan;
use crate::jobs::insert::insert_many;
use crate::queue_limits::{CLAIM_KEYED, KEYS_AFTER};
use crate::testing::TestDatabase;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_key_statements_read_one_entry_per_key() {
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
    diesel::sql_query("ANALYZE jobs").execute(&mut conn).await.expect("analyze");
    for (name, sql) in [("walk", KEYS_AFTER), ("claim_keyed", CLAIM_KEYED)] {
        diesel::sql_query(format!("PREPARE {name} AS {sql}")).execute(&mut conn).await.expect("prepare");
    }
    for mode in ["force_generic_plan", "force_custom_plan"] {
        let walk = plan(&mut conn, mode, "walk('keyed', '', 100)").await;
        assert!(walk.contains("jobs_partition_idx") && !walk.contains("Seq Scan"), "{mode}:\n{walk}");
        let claim = plan(
            &mut conn,
            mode,
            "claim_keyed('keyed', ARRAY['hot', 'customer_0001'], 'planner', NULL, ARRAY[2, 1]::int8[])",
        )
        .await;
        assert!(
            claim.contains("jobs_partition_idx") && !claim.contains("Seq Scan") && !claim.contains("Sort"),
            "{mode}:\n{claim}"
        );
    }
    // Walked for real: the busy key's 10,000 jobs are passed in one step.
    #[derive(QueryableByName)]
    struct Key {
        #[diesel(sql_type = Text)]
        key: String,
    }
    let keys: Vec<Key> =
        diesel::sql_query("EXECUTE walk('keyed', '', 1001)").load(&mut conn).await.expect("walk");
    assert_eq!(keys.len(), 1_001);
    assert_eq!((keys[0].key.as_str(), keys[1_000].key.as_str()), ("customer_0000", "hot"));
}
