//! One trace from an actix-web request, through the enqueue, to the job's run in another
//! process (feature `opentelemetry`): the request's span here, the `jobs.enqueue` span its
//! enqueue opens, the run's `job` span in the `traced_worker` process (a child of the
//! enqueue's span, found through the job's metadata), and a span the handler opens there.

use std::process::Stdio;
use std::time::Duration;

use actix_web::{App, HttpResponse, HttpServer, web};
use jobs_core::Workflow;
use jobs_core::driver::{Driver, JobGetParams};
use jobs_tests::traced::{Hello, SpanRecord, Spans, traced_hello};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tracing::Instrument;

const WORKER: &str = env!("CARGO_BIN_EXE_traced_worker");

/// `POST /hello`: enqueues a greeting inside the request's span; answers with its id.
async fn hello(driver: web::Data<std::sync::Arc<dyn Driver>>) -> HttpResponse {
    let span = tracing::info_span!("POST /hello", otel.kind = "server", http.request.method = "POST");
    async {
        match traced_hello::enqueue(driver.get_ref(), Hello { name: "Ada".into() }).await {
            Ok(enqueued) => HttpResponse::Created().body(enqueued.id.to_string()),
            Err(e) => HttpResponse::InternalServerError().body(e.to_string()),
        }
    }
    .instrument(span)
    .await
}

async fn post(address: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.expect("connect");
    let request =
        format!("POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    response
}

fn one<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found: Vec<&SpanRecord> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one span {name:?} among {spans:#?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_a_request_through_the_enqueue_to_the_run_in_another_process() {
    let spans = Spans::install("traced-app");
    let dir = std::env::temp_dir().join(format!("jobs-trace-{}", rand::random::<u32>()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let url = format!("sqlite://{}", dir.join("jobs.db").display());
    let driver = jobs_core::driver_for_url(&url, 4).expect("driver");
    driver.migrate().await.expect("migrate");

    let data = web::Data::new(driver.clone());
    let server =
        HttpServer::new(move || App::new().app_data(data.clone()).route("/hello", web::post().to(hello)))
            .workers(1)
            .disable_signals()
            .bind("127.0.0.1:0")
            .expect("bind");
    let address = server.addrs()[0].to_string();
    let server = server.run();
    let stop = server.handle();
    tokio::spawn(server);

    let response = post(&address, "/hello").await;
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");
    let id: i64 = response.rsplit("\r\n").next().and_then(|b| b.trim().parse().ok()).expect("the job's id");
    stop.stop(true).await;
    let row = driver.job_get(JobGetParams { id }).await.expect("get").expect("the job");
    assert!(row.meta["traceparent"].as_str().is_some_and(|t| t.starts_with("00-")), "{:?}", row.meta);

    // The worker, another process, runs it and prints its spans.
    let mut worker = Command::new(WORKER)
        .args(["--url", &url, "--job", &id.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start traced_worker");
    let mut lines = BufReader::new(worker.stdout.take().expect("stdout")).lines();
    let mut theirs: Vec<SpanRecord> = Vec::new();
    let read = async {
        let mut printing = false;
        while let Ok(Some(line)) = lines.next_line().await {
            if printing {
                theirs.push(serde_json::from_str(&line).expect("a span"));
            }
            printing |= line == "spans:";
        }
    };
    tokio::time::timeout(Duration::from_secs(90), read).await.expect("the worker's spans in time");
    let status = worker.wait().await.expect("wait");
    assert!(status.success(), "traced_worker exited with {status}");

    let ours = spans.finished();
    let request = one(&ours, "POST /hello");
    let enqueue = one(&ours, "send traced");
    let run = one(&theirs, "process traced");
    let inner = one(&theirs, "compose greeting");
    // One trace: request → enqueue (here) → the run → the handler's span (there).
    assert_eq!((request.kind.as_str(), request.parent_span_id.as_str()), ("Server", "0000000000000000"));
    assert_eq!(
        (enqueue.kind.as_str(), &enqueue.trace_id, &enqueue.parent_span_id),
        ("Producer", &request.trace_id, &request.span_id)
    );
    assert_eq!(
        (run.kind.as_str(), &run.trace_id, &run.parent_span_id),
        ("Consumer", &request.trace_id, &enqueue.span_id)
    );
    assert_eq!((&inner.trace_id, &inner.parent_span_id), (&request.trace_id, &run.span_id));
    // The messaging attributes.
    let attribute = |span: &SpanRecord, key: &str| span.attributes.get(key).cloned().unwrap_or_default();
    assert_eq!(attribute(enqueue, "messaging.system"), "jobs");
    assert_eq!(attribute(enqueue, "messaging.operation.type"), "send");
    assert_eq!(attribute(enqueue, "messaging.destination.name"), "traced");
    assert_eq!(attribute(enqueue, "messaging.batch.message_count"), "1");
    assert_eq!(attribute(run, "messaging.operation.type"), "process");
    assert_eq!(attribute(run, "messaging.destination.name"), "traced");
    assert_eq!(attribute(run, "messaging.message.id"), id.to_string());
    assert_eq!(attribute(run, "job.kind"), "traced.hello");

    // A workflow's steps carry the trace of the code that enqueued them, through one
    // enqueue span of their own.
    let import = tracing::info_span!("nightly import");
    let steps = async {
        let mut workflow = Workflow::new("traced");
        let first = workflow.add(traced_hello::build(Hello { name: "Grace".into() }));
        workflow.add_after(traced_hello::build(Hello { name: "Edsger".into() }), [&first]);
        workflow.enqueue(&driver).await
    }
    .instrument(import)
    .await
    .expect("enqueue the workflow")
    .jobs;
    let ours = spans.finished();
    let import = one(&ours, "nightly import");
    let enqueues: Vec<&SpanRecord> =
        ours.iter().filter(|s| s.name == "send traced" && s.trace_id == import.trace_id).collect();
    assert_eq!(enqueues.len(), 1, "{ours:#?}");
    assert_eq!(
        (&enqueues[0].parent_span_id, attribute(enqueues[0], "messaging.batch.message_count").as_str()),
        (&import.span_id, "2")
    );
    for step in steps {
        let row = driver.job_get(JobGetParams { id: step.id }).await.expect("get").expect("the step");
        let expected = format!("00-{}-{}-01", import.trace_id, enqueues[0].span_id);
        assert_eq!(row.meta["traceparent"], expected.as_str());
    }
    let _ = std::fs::remove_dir_all(&dir);
}
