//! A parameter spelled `Data<..>` must be `jobs_core::Data`.
use jobs_core::{JobContext, job};

mod web {
    pub struct Data<T>(pub T);
}

#[job]
async fn actix_data(_ctx: JobContext, n: i64, _pool: web::Data<String>) -> Result<i64, std::io::Error> {
    Ok(n)
}

fn main() {}
