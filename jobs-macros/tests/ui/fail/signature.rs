use jobs_core::{JobContext, job};

#[job]
async fn no_params() -> Result<(), std::io::Error> {
    Ok(())
}

#[job]
async fn three_params(_ctx: JobContext, _a: i64, _b: i64) -> Result<(), std::io::Error> {
    Ok(())
}

#[job]
async fn generic<T>(_ctx: JobContext, _a: T) -> Result<(), std::io::Error> {
    Ok(())
}

#[job]
async fn no_return(_ctx: JobContext, _a: i64) {}


#[job]
async fn args_after_data(_ctx: JobContext, _m: jobs_core::Data<String>, _a: i64) -> Result<(), std::io::Error> {
    Ok(())
}

fn main() {}
