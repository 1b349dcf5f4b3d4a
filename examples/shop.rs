//! The demo: an actix-web + diesel shop whose jobs run in the same process, with the
//! dashboard mounted at `/jobs/`.
//!
//!     cargo run -p jobs-examples --bin shop               # on a SQLite file: nothing to install
//!     cargo run -p jobs-examples --bin shop -- --postgres  # on a throwaway local Postgres
//!     cargo run -p jobs-examples --bin shop -- --mariadb   # on a throwaway local MariaDB
//!     DATABASE_URL=postgres://… cargo run -p jobs-examples --bin shop   # or mysql://…, sqlite://…
//!
//! `DATABASE_URL`'s scheme picks the backend (`postgres://`, `sqlite://`, `mysql://`).
//! Without it the shop runs on a fresh SQLite file in the temporary directory, or, with
//! `--postgres` or `--mariadb`, on a throwaway server started from the installed server
//! binaries (removed on exit). It prints the URL, so `shop-worker` can join it. Then it:
//! - serves `POST /signup` (`email=...`): writes the user and enqueues the welcome mail in
//!   one transaction, and `POST /orders` (`user_id=...&cents=...`): writes the order and
//!   enqueues a workflow, its fulfilment (which fails twice and succeeds on the third
//!   attempt) and then the customer's shipping mail, which reads the fulfilment's answer;
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

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use jobs_core::driver::{Driver, JobCountByQueueAndStateParams};
use jobs_core::mysql::testing::LocalServer;
use jobs_core::testing::PgCluster;
use jobs_examples::{Charge, Db, Welcome, charge_order, sales_report, send_welcome, store};
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
async fn sign_up(db: web::Data<Db>, form: web::Form<SignUp>) -> HttpResponse {
    match store::sign_up(&db, &form.email).await {
        Ok(user_id) => HttpResponse::Created().body(format!("welcome, user {user_id}\n")),
        Err(e) => HttpResponse::UnprocessableEntity().body(format!("sign-up failed: {e}\n")),
    }
}

/// `POST /orders`: the order and its workflow (fulfil, then mail) commit together.
async fn place_order(db: web::Data<Db>, form: web::Form<NewOrder>) -> HttpResponse {
    match store::place_order(&db, form.user_id, form.cents).await {
        Ok(order_id) => HttpResponse::Created().body(format!("order {order_id} placed\n")),
        Err(e) => HttpResponse::UnprocessableEntity().body(format!("order failed: {e}\n")),
    }
}

async fn sample_data(db: &Db, driver: &Arc<dyn Driver>) -> Result<(), Box<dyn std::error::Error>> {
    let mut first_user = None;
    for n in 1..=20 {
        let email =
            if n % 10 == 0 { format!("user{n}@bounce.example") } else { format!("user{n}@example.com") };
        let user_id = store::sign_up(db, &email).await?;
        first_user.get_or_insert(user_id);
    }
    let user = first_user.unwrap_or(1);
    for cents in [1999, 4200] {
        store::place_order(db, user, cents).await?;
    }
    // Order 1 is charged twice (a double click): `unique(fields(order_id))` keeps one job.
    let charges = [(1, 1999), (1, 1999), (2, 0), (3, -500), (7, 4200), (8, 1250)];
    let charged = jobs_core::enqueue_many(
        driver,
        charges.map(|(order_id, cents)| charge_order::build(Charge { order_id, cents })),
    )
    .await?;
    println!(
        "order 1 charged twice: both calls returned job {} (the second found it queued: {})",
        charged[1].id, charged[1].existing
    );
    sales_report::build(()).meta("warehouse_busy", true).enqueue(driver).await?;
    send_welcome::build(Welcome { user_id: user, email: "user1@example.com".into() })
        .run_in(Duration::from_secs(600))
        .enqueue(driver)
        .await?;
    Ok(())
}

/// A throwaway database server the shop started, stopped and removed when dropped.
#[allow(dead_code)]
enum Server {
    Postgres(PgCluster),
    MariaDb(LocalServer),
}

/// Where the shop's database is: `DATABASE_URL`; else a throwaway Postgres with
/// `--postgres` or MariaDB with `--mariadb`; else a fresh SQLite file. Returns the URL and
/// the server to keep alive.
fn choose_database() -> Result<(String, Option<Server>), Box<dyn std::error::Error>> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        return Ok((url, None));
    }
    if std::env::args().any(|a| a == "--postgres") {
        let cluster = PgCluster::start_private(jobs_core::testing::cluster::TEST_SETTINGS)?;
        let url = cluster.url("postgres");
        println!("started a throwaway Postgres (removed on exit); to add a separate worker:");
        println!("  DATABASE_URL='{url}' cargo run -p jobs-examples --bin shop-worker");
        return Ok((url, Some(Server::Postgres(cluster))));
    }
    if std::env::args().any(|a| a == "--mariadb") {
        let server = LocalServer::start_private()?;
        let url = server.url("mysql");
        println!("started a throwaway MariaDB (removed on exit); to add a separate worker:");
        println!("  DATABASE_URL='{url}' cargo run -p jobs-examples --bin shop-worker");
        return Ok((url, Some(Server::MariaDb(server))));
    }
    let path = std::env::temp_dir().join("jobs-shop-demo.db");
    for stale in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{stale}", path.display()));
    }
    let url = format!("sqlite://{}", path.display());
    println!("DATABASE_URL is unset: the shop runs on a fresh SQLite file, {}", path.display());
    println!("to add a separate worker:");
    println!("  DATABASE_URL='{url}' cargo run -p jobs-examples --bin shop-worker");
    println!(
        "the same demo on Postgres or MariaDB: `-- --postgres` or `-- --mariadb` (a throwaway local \
         server), or DATABASE_URL=postgres://… or mysql://…"
    );
    Ok((url, None))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Both stop the shop, as Ctrl-C does; listened for from the start, so that one sent
    // while it starts up is not lost.
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // The engine's metrics, for Prometheus to scrape on /metrics (docs/guide.md, "Metrics").
    let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
    jobs_core::metrics::describe();
    let (url, database_server) = choose_database()?;
    let (db, driver) = Db::open(&url, 16).await?;
    println!("database: {} ({})", driver.name(), without_password(&url));

    let in_process = std::env::var("SHOP_WORKER").map_or(true, |v| v != "off");
    let worker = if in_process {
        let handle = jobs_examples::worker(driver.clone()).build()?.start().await?;
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
    // A demo on your own machine: open to whoever reaches it. Your app says who may use it
    // with `.authorize(|req| ...)`.
    let dashboard = jobs_dashboard::DashboardConfig::new(driver.clone()).open_to_everyone();
    let app_db = web::Data::new(db.clone());
    let server = actix_web::HttpServer::new(move || {
        actix_web::App::new()
            .app_data(app_db.clone())
            .route(
                "/",
                web::get().to(|| async {
                    "The shop: POST /signup, POST /orders; its jobs are at /jobs/, its metrics at /metrics\n"
                }),
            )
            .route("/metrics", {
                let prometheus = prometheus.clone();
                web::get().to(move || std::future::ready(prometheus.render()))
            })
            .route("/signup", web::post().to(sign_up))
            .route("/orders", web::post().to(place_order))
            .service(jobs_dashboard::scope("/jobs", dashboard.clone()))
    })
    .workers(2)
    // The app stops on SIGINT and SIGTERM itself, in order (below): actix would stop only
    // its server, leaving the workers running with nothing listening.
    .disable_signals()
    .bind(&bind)?;
    let address = server.addrs().into_iter().next().map_or(bind, |a| a.to_string());
    let server = server.run();
    let server_handle = server.handle();
    tokio::spawn(server);

    sample_data(&db, &driver).await?;
    println!("dashboard: http://{address}/jobs/");
    println!(
        "enqueued: 20 welcome mails, each with its user row (the 2 to @bounce.example fail and retry),\n\
         2 orders whose fulfilment fails twice then succeeds, charges (one cancels itself, one is\n\
         discarded, one panics and retries), a report that snoozes 5 s, a mail scheduled in 10 minutes,\n\
         and cron jobs (carts every minute, a nightly digest). Try:\n  \
         curl -d email=you@example.com http://{address}/signup\n\
         Job counts every 2 s below. Press Ctrl-C (or send SIGTERM) to stop."
    );
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = ticker.tick() => {
                let counts = driver.job_count_by_queue_and_state(JobCountByQueueAndStateParams {}).await?;
                let mut by_state: Vec<(jobs_core::JobState, i64)> = Vec::new();
                for (_, state, n) in counts {
                    match by_state.iter_mut().find(|(s, _)| *s == state) {
                        Some((_, total)) => *total += n,
                        None => by_state.push((state, n)),
                    }
                }
                by_state.sort();
                let line: Vec<String> = by_state.iter().map(|(s, n)| format!("{s} {n}")).collect();
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
    drop(database_server);
    Ok(())
}

/// `url` with its password, if any, replaced by `***` (for printing).
fn without_password(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((credentials, host)) => {
                let user = credentials.split_once(':').map_or(credentials, |(user, _)| user);
                format!("{scheme}://{user}:***@{host}")
            }
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}
