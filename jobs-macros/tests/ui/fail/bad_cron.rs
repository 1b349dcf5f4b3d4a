use jobs_core::{JobContext, job};

#[job(cron = "61 * * * *")]
async fn a(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(cron = "0 * * * *", cron_tz = "Mars/Olympus")]
async fn b(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(cron_tz = "UTC")]
async fn c(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(cron = "0 * * * *", cron_missed = "all")]
async fn d(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
