//! Values of the application's as `Data<T>` parameters: after the arguments, without
//! arguments, by any path.
use jobs_core::{Data, Job, JobContext, job};

struct Mailer;
struct Config {
    from: &'static str,
}

#[job]
async fn with_args(_ctx: JobContext, n: i64, _mailer: Data<Mailer>, config: jobs_core::Data<Config>) -> Result<i64, std::io::Error> {
    Ok(n + config.from.len() as i64)
}

#[job]
async fn without_args(_ctx: JobContext, _mailer: Data<Mailer>) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {
    assert_eq!(<with_args as Job>::needs().len(), 2);
    assert_eq!(<without_args as Job>::needs().len(), 1);
    let _ = with_args::call;
}
