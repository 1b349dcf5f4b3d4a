use jobs_core::{JobContext, job};

#[job(timeout = "thirty seconds")]
async fn a(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(timeout = "0s")]
async fn b(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(backoff = exponential(base = "1m", max = "1s"))]
async fn c(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(backoff = fibonacci)]
async fn d(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
