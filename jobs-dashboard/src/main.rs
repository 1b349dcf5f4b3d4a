//! `jobs-dashboard serve --database-url ... --bind ...`: the dashboard on its own.

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "jobs-dashboard", about = "The jobs dashboard, standalone.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serves the dashboard.
    Serve {
        /// The database holding the jobs.
        #[arg(long, env = "DATABASE_URL")]
        database_url: String,
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        bind: String,
        /// Path to mount the dashboard at.
        #[arg(long, default_value = "/")]
        mount: String,
        /// Hide and refuse every action.
        #[arg(long)]
        read_only: bool,
    },
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    match Cli::parse().command {
        Command::Serve { database_url, bind, mount, read_only } => {
            let pool = jobs_core::db::pool(&database_url, 8)?;
            let mut config = jobs_dashboard::DashboardConfig::new(pool);
            if read_only {
                config = config.authorize(|_: &actix_web::HttpRequest| jobs_dashboard::Access::ReadOnly);
            }
            let mount = mount.trim_end_matches('/').to_owned();
            println!("jobs dashboard on http://{bind}{mount}/");
            actix_web::HttpServer::new(move || {
                actix_web::App::new().service(jobs_dashboard::scope(&mount, config.clone()))
            })
            .bind(&bind)?
            .run()
            .await?;
            Ok(())
        }
    }
}
