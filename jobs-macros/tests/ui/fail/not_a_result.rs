use jobs_core::{JobContext, job};

#[job]
async fn returns_a_number(_ctx: JobContext, a: i64) -> i64 {
    a
}

fn main() {}
