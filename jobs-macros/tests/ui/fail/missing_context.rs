use jobs_core::job;

#[derive(serde::Serialize, serde::Deserialize)]
struct Welcome {
    user_id: i64,
}

#[job]
async fn send_welcome(args: Welcome) -> Result<i64, std::io::Error> {
    Ok(args.user_id)
}

fn main() {}
