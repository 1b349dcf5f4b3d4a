use jobs_core::{JobContext, job};

#[job(queu = "mail")]
async fn a(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(max_attempts = 0)]
async fn b(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(priority = 40000)]
async fn c(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(queue = "mail", queue = "sms")]
async fn d(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(unique(states(available, finished)))]
async fn e(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

#[job(tags = ["has space"])]
async fn f(_ctx: JobContext) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
