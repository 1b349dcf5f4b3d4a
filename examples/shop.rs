//! The demo: a shop that enqueues jobs in its transactions, runs a worker in-process, and
//! mounts the dashboard at `/jobs/` (on `SHOP_BIND`, default `127.0.0.1:8080`).
//!
//! `cargo run -p jobs-examples --bin shop`. Without `DATABASE_URL` it starts a throwaway
//! Postgres and removes it on exit. Stop it with Ctrl-C.

use std::time::Duration;

use diesel::prelude::*;
use diesel_async::{AsyncConnection, RunQueryDsl};
use jobs_core::testing::PgCluster;
use jobs_core::{JobState, Worker};
use jobs_examples::{Charge, Welcome, charge_order, sales_report, send_welcome};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (cluster, url) = PgCluster::from_env_or_private(jobs_core::testing::cluster::TEST_SETTINGS)?;
    if let Some(cluster) = &cluster {
        println!("DATABASE_URL is unset: started a throwaway Postgres at {}", cluster.socket_dir().display());
    }
    jobs_core::migrate(jobs_core::db::connect(&url).await?).await?;
    let pool = jobs_core::db::pool(&url, 16)?;

    let worker = Worker::builder(pool.clone())
        .queue("mailers", 10)
        .queue("billing", 5)
        .queue("reports", 1)
        .queue("maintenance", 1)
        .build()?
        .start()
        .await?;
    println!(
        "worker {} started: queues mailers (10 slots), billing (5), reports (1), maintenance (1)",
        worker.node()
    );

    // Sign-ups: the user row and the welcome mail commit together.
    let mut conn = jobs_core::db::connect(&url).await?;
    diesel::sql_query("CREATE TABLE IF NOT EXISTS users (id bigint PRIMARY KEY, email text NOT NULL)")
        .execute(&mut conn)
        .await?;
    for user_id in 1..=20_i64 {
        let email = if user_id % 10 == 0 {
            format!("user{user_id}@bounce.example")
        } else {
            format!("user{user_id}@example.com")
        };
        conn.transaction(async |tx| {
            diesel::sql_query("INSERT INTO users VALUES ($1, $2) ON CONFLICT DO NOTHING")
                .bind::<diesel::sql_types::BigInt, _>(user_id)
                .bind::<diesel::sql_types::Text, _>(&email)
                .execute(tx)
                .await?;
            send_welcome::enqueue(&mut *tx, Welcome { user_id, email: email.clone() }).await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
        .await
        .map_err(|e| e.to_string())?;
    }
    // Order 1 is submitted twice (a double click): `unique(fields(order_id))` keeps one job.
    let orders = [(1, 1999), (1, 1999), (2, 0), (3, -500), (7, 4200), (8, 1250)];
    let charges = jobs_core::enqueue_many(
        &pool,
        orders.map(|(order_id, cents)| charge_order::build(Charge { order_id, cents })),
    )
    .await?;
    println!(
        "order 1 submitted twice: both calls returned job {} (the second found it already queued: {})",
        charges[1].id, charges[1].existing
    );
    sales_report::build(()).meta("warehouse_busy", true).enqueue(&pool).await?;

    // The dashboard, mounted in the shop's own actix-web app.
    let bind = std::env::var("SHOP_BIND").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let dashboard = jobs_dashboard::DashboardConfig::new(pool.clone());
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .route("/", actix_web::web::get().to(|| async { "The shop. Its jobs are at /jobs/" }))
            .service(jobs_dashboard::scope("/jobs", dashboard.clone()))
    })
    .workers(2)
    .bind(&bind)?
    .run();
    let server_handle = server.handle();
    tokio::spawn(server);
    println!("dashboard: http://{bind}/jobs/");
    println!(
        "enqueued: 20 welcome mails (each committed with its user row; the 2 to @bounce.example fail and\n\
         retry with exponential backoff), 5 order charges (order 2 cancels itself, order 3 is discarded,\n\
         order 7's handler panics and is retried), a sales report that snoozes 5 s, and a cron job\n\
         every minute. Below: job counts by state every 2 s. Press Ctrl-C to stop."
    );
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = ticker.tick() => {
                use jobs_core::schema::jobs::dsl::*;
                let counts: Vec<(JobState, i64)> = jobs
                    .group_by(state)
                    .select((state, diesel::dsl::count_star()))
                    .order(state)
                    .load(&mut conn)
                    .await?;
                let line: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
                println!("jobs by state: {}", line.join(" | "));
            }
        }
    }
    server_handle.stop(true).await;
    let report = worker.shutdown().await?;
    println!("worker stopped ({} jobs handed back)", report.handed_back);
    Ok(())
}
