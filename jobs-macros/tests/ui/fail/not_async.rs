use jobs_core::{JobContext, job};

#[job]
fn send(_ctx: JobContext, _id: i64) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
