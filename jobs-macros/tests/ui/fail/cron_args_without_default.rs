use jobs_core::{JobContext, job};

#[derive(serde::Serialize, serde::Deserialize)]
struct Needed {
    id: i64,
}

#[job(cron = "@hourly")]
async fn hourly(_ctx: JobContext, _args: Needed) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
