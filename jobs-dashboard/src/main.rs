//! `jobs-dashboard`: migrate, inspect and manage jobs, enqueue one, serve the dashboard.
//! See [`jobs_dashboard::cli`] and `jobs-dashboard --help`.

use clap::Parser;

// A multi-thread runtime: migrations need one; the dashboard's server runs on it too.
#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = jobs_dashboard::cli::Cli::parse();
    match cli.run(&mut std::io::stdout()).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
