use jobs_core::{JobContext, job};

struct NotSerde {
    _id: i64,
}

#[job]
async fn opaque(_ctx: JobContext, _args: NotSerde) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
