//! The demo: an actix-web + diesel shop whose jobs run in the same process, with the
//! dashboard mounted at `/jobs/`.
//!
//!     cargo run -p jobs-examples --bin shop
//!
//! Without `DATABASE_URL` it starts a throwaway Postgres (removed on exit) and prints its
//! URL, so `shop-worker` can join it. Then it:
//! - serves `POST /signup` (`email=...`): writes the user and enqueues the welcome mail in
//!   one transaction, and `POST /orders` (`user_id=...&cents=...`): writes the order and
//!   enqueues its fulfilment, which fails twice and succeeds on the third attempt;
//! - signs up 20 sample users (two addresses bounce: their mails fail and retry), places
//!   orders, charges some (one cancels itself, one is discarded, one panics and retries),
//!   schedules a follow-up mail for later, and runs two cron jobs (carts every minute, a
//!   digest nightly at 03:00 UTC);
//! - prints the dashboard URL and the job counts every 2 s, until Ctrl-C, then stops the
//!   server and shuts the worker down cleanly (running jobs finish or are handed back).
//!
//! `SHOP_BIND` sets the address (default `127.0.0.1:8080`; port 0 picks one);
//! `SHOP_WORKER=off` runs no worker in-process (run `shop-worker` instead).

use std::time::Duration;

use actix_web::{HttpResponse, web};
use diesel::prelude::*;
use diesel_async::{RunQueryDsl, SimpleAsyncConnection};
use jobs_core::testing::PgCluster;
use jobs_core::{JobState, Pool};
use jobs_examples::{Charge, Welcome, charge_order, sales_report, schema, send_welcome, store};
use serde::Deserialize;

#[derive(Deserialize)]
struct SignUp {
    email: String,
}

#[derive(Deserialize)]
struct NewOrder {
    user_id: i64,
    cents: i64,
}

/// `POST /signup`: the user and the welcome mail commit together, or neither does.
async fn sign_up(pool: web::Data<Pool>, form: web::Form<SignUp>) -> HttpResponse {
    let result = async {
        let mut conn = pool.get().await.map_err(jobs_core::Error::from)?;
        store::sign_up(&mut conn, &form.email).await
    }
    .await;
    match result {
        Ok(user_id) => HttpResponse::Created().body(format!("welcome, user {user_id}\n")),
        Err(e) => HttpResponse::UnprocessableEntity().body(format!("sign-up failed: {e}\n")),
    }
}

/// `POST /orders`: the order and its fulfilment job commit together.
async fn place_order(pool: web::Data<Pool>, form: web::Form<NewOrder>) -> HttpResponse {
    let result = async {
        let mut conn = pool.get().await.map_err(jobs_core::Error::from)?;
        store::place_order(&mut conn, form.user_id, form.cents).await
    }
    .await;
    match result {
        Ok(order_id) => HttpResponse::Created().body(format!("order {order_id} placed\n")),
        Err(e) => HttpResponse::UnprocessableEntity().body(format!("order failed: {e}\n")),
    }
}

async fn sample_data(pool: &Pool) -> Result<(), Box<dyn std::error::Error>> {
    let mut conn = pool.get().await?;
    let mut first_user = None;
    for n in 1..=20 {
        let email =
            if n % 10 == 0 { format!("user{n}@bounce.example") } else { format!("user{n}@example.com") };
        let user_id = store::sign_up(&mut conn, &email).await?;
        first_user.get_or_insert(user_id);
    }
    let user = first_user.unwrap_or(1);
    for cents in [1999, 4200] {
        store::place_order(&mut conn, user, cents).await?;
    }
    // Order 1 is charged twice (a double click): `unique(fields(order_id))` keeps one job.
    let charges = [(1, 1999), (1, 1999), (2, 0), (3, -500), (7, 4200), (8, 1250)];
    let charged = jobs_core::enqueue_many(
        pool,
        charges.map(|(order_id, cents)| charge_order::build(Charge { order_id, cents })),
    )
    .await?;
    println!(
        "order 1 charged twice: both calls returned job {} (the second found it queued: {})",
        charged[1].id, charged[1].existing
    );
    sales_report::build(()).meta("warehouse_busy", true).enqueue(pool).await?;
    send_welcome::build(Welcome { user_id: user, email: "user1@example.com".into() })
        .run_in(Duration::from_secs(600))
        .enqueue(pool)
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (cluster, url) = PgCluster::from_env_or_private(jobs_core::testing::cluster::TEST_SETTINGS)?;
    if cluster.is_some() {
        println!("DATABASE_URL is unset: started a throwaway Postgres; to add a separate worker:");
        println!("  DATABASE_URL='{url}' cargo run -p jobs-examples --bin shop-worker");
    }
    jobs_core::migrate(jobs_core::postgres::connect(&url).await?).await?;
    let pool = jobs_core::postgres::pool(&url, 16)?;
    {
        let mut conn = pool.get().await?;
        conn.batch_execute(schema::CREATE).await?;
    }

    let in_process = std::env::var("SHOP_WORKER").map_or(true, |v| v != "off");
    let worker = if in_process {
        let handle = jobs_examples::worker(pool.clone()).build()?.start().await?;
        println!(
            "worker {} started in-process: queues mailers, billing, reports, maintenance",
            handle.node()
        );
        Some(handle)
    } else {
        println!("no worker in-process (SHOP_WORKER=off): jobs wait for shop-worker");
        None
    };

    let bind = std::env::var("SHOP_BIND").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let dashboard = jobs_dashboard::DashboardConfig::new(pool.clone());
    let app_pool = web::Data::new(pool.clone());
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .app_data(app_pool.clone())
            .route(
                "/",
                web::get().to(|| async { "The shop: POST /signup, POST /orders; its jobs are at /jobs/\n" }),
            )
            .route("/signup", web::post().to(sign_up))
            .route("/orders", web::post().to(place_order))
            .service(jobs_dashboard::scope("/jobs", dashboard.clone()))
    })
    .workers(2)
    .bind(&bind)?;
    let address = server.addrs().into_iter().next().map_or(bind, |a| a.to_string());
    let server = server.run();
    let server_handle = server.handle();
    tokio::spawn(server);

    sample_data(&pool).await?;
    println!("dashboard: http://{address}/jobs/");
    println!(
        "enqueued: 20 welcome mails, each with its user row (the 2 to @bounce.example fail and retry),\n\
         2 orders whose fulfilment fails twice then succeeds, charges (one cancels itself, one is\n\
         discarded, one panics and retries), a report that snoozes 5 s, a mail scheduled in 10 minutes,\n\
         and cron jobs (carts every minute, a nightly digest). Try:\n  \
         curl -d email=you@example.com http://{address}/signup\n\
         Job counts every 2 s below. Press Ctrl-C to stop."
    );
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = ticker.tick() => {
                let mut conn = pool.get().await?;
                let counts: Vec<(JobState, i64)> = jobs_core::schema::jobs::table
                    .group_by(jobs_core::schema::jobs::state)
                    .select((jobs_core::schema::jobs::state, diesel::dsl::count_star()))
                    .order(jobs_core::schema::jobs::state)
                    .load(&mut conn)
                    .await?;
                let line: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
                println!("jobs by state: {}", line.join(" | "));
            }
        }
    }
    println!("stopping: the web server first, then the worker");
    server_handle.stop(true).await;
    if let Some(worker) = worker {
        let report = worker.shutdown().await?;
        println!("worker stopped cleanly ({} jobs handed back)", report.handed_back);
    }
    drop(cluster);
    Ok(())
}
