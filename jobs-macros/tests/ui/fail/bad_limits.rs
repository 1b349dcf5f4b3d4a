use jobs_core::{JobContext, job};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
struct Export {
    customer_id: i64,
}

#[job(limit = 0)]
async fn a(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(limit = 1, partition_by = "customer")]
async fn b(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(partition_by = "customer id")]
async fn c(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(partition_by = "meta.")]
async fn d(_ctx: JobContext, _args: Export) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
