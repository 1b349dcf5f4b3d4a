//! Enqueueing from synchronous diesel: an r2d2 pool of `PgConnection`s, as in an app that
//! does not use async diesel. The job commits or rolls back with the transaction.
//!
//!     cargo run -p jobs-example-sync --bin sync-enqueue
//!
//! Without `DATABASE_URL` it starts a throwaway Postgres. It signs up one user (user row +
//! welcome mail in one transaction), attempts a second sign-up that rolls back (no user,
//! no job), then runs the queue once to show the mail being sent.

use diesel::connection::SimpleConnection;
use diesel::prelude::*;
use diesel::r2d2::{ConnectionManager, Pool};
use jobs_core::testing::PgCluster;
use jobs_core::{JobState, Worker};
use jobs_examples::schema::users;
use jobs_examples::{Welcome, schema, send_welcome};

fn sign_up(conn: &mut PgConnection, email: &str, fail_after_insert: bool) -> Result<i64, jobs_core::Error> {
    conn.transaction(|tx| {
        let user_id: i64 = diesel::insert_into(users::table)
            .values(users::email.eq(email))
            .returning(users::id)
            .get_result(tx)?;
        let job = send_welcome::enqueue_sync(tx, Welcome { user_id, email: email.to_owned() })?;
        println!("  in the transaction: user {user_id}, welcome mail job {}", job.id);
        if fail_after_insert {
            // Anything failing later in the request rolls both back.
            return Err(jobs_core::Error::InvalidOption {
                option: "email",
                reason: "rejected by a later check".into(),
            });
        }
        Ok(user_id)
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (cluster, url) = PgCluster::from_env_or_private(jobs_core::testing::cluster::TEST_SETTINGS)?;
    jobs_core::migrate(jobs_core::postgres::connect(&url).await?).await?;
    let sync_pool = Pool::builder().max_size(4).build(ConnectionManager::<PgConnection>::new(&url))?;
    let mut conn = sync_pool.get()?;
    conn.batch_execute(schema::CREATE_POSTGRES)?;

    println!("signing up ada@example.com:");
    let user = sign_up(&mut conn, "ada@example.com", false)?;
    println!("  committed: user {user}");
    println!("signing up bob@example.com, rejected after the insert:");
    match sign_up(&mut conn, "bob@example.com", true) {
        Ok(_) => println!("  committed (unexpected)"),
        Err(e) => println!("  rolled back ({e}): no user row and no job"),
    }
    let waiting: i64 = jobs_core::postgres::schema::jobs::table
        .filter(jobs_core::postgres::schema::jobs::state.eq(JobState::Available))
        .count()
        .get_result(&mut conn)?;
    println!("jobs waiting: {waiting}");

    // Run what is due once, inline (an app would run a worker instead).
    let async_pool = jobs_core::postgres::pool(&url, 4)?;
    let ran = Worker::builder(async_pool).queue("mailers", 1).without_maintenance().build()?.drain().await?;
    for job in ran {
        println!("ran job {} ({}): {} {}", job.id, job.kind, job.state, job.result.unwrap_or_default());
    }
    drop(cluster);
    Ok(())
}
