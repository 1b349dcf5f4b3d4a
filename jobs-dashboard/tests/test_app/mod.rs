//! The dashboard under test, shared by the route and abuse tests: an app on a real
//! database, requests with and without the CSRF token, and fixtures.
#![allow(dead_code)] // each test binary uses part of it

pub(crate) mod cli;

use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceResponse};
use actix_web::http::StatusCode;
use actix_web::{App, test};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::driver::{
    Driver, QueueIsPausedParams, ScheduleDef, ScheduleGetParams, ScheduleRow, ScheduleSyncParams,
};
use jobs_core::postgres::Pool;
use jobs_core::postgres::schema::jobs;
use jobs_core::{IntoDriver, JobState, NewJob};
use jobs_dashboard::{Access, DashboardConfig};

pub(crate) fn new_job(kind: &str, queue: &str, args: serde_json::Value) -> NewJob {
    NewJob {
        kind: kind.to_owned().into(),
        queue: queue.to_owned().into(),
        args: args.to_string(),
        meta: r#"{"request_id":"req-1"}"#.into(),
        tags: vec!["signup".into()],
        priority: 0,
        max_attempts: 5,
        timeout_ms: None,
        run_at: None,
        delay_ms: None,
        unique: None,
    }
}

/// A heartbeat of `node-a`, live now: it runs `queues` (`{"name": {"limit": .., "running":
/// ..}}`) and `kinds`, declaring `kind_options` for them.
pub(crate) async fn live_node(
    pool: &Pool,
    queues: serde_json::Value,
    kinds: &[&str],
    kind_options: serde_json::Value,
) {
    let beat = jobs_core::driver::NodeHeartbeatParams {
        node: "node-a",
        host: "h",
        pid: 1,
        queues: &queues,
        kinds,
        kind_options: &kind_options,
        now: None,
        lock: None,
        registering: false,
    };
    driver(pool).node_heartbeat(beat).await.expect("heartbeat");
}

/// The driver the dashboard reads through.
pub(crate) fn driver(pool: &Pool) -> std::sync::Arc<dyn Driver> {
    pool.into_driver()
}

/// Whether `queue` is paused.
pub(crate) async fn is_paused(pool: &Pool, queue: &str) -> bool {
    driver(pool).queue_is_paused(QueueIsPausedParams { queue }).await.expect("paused")
}

/// Declares schedules, as a worker would.
pub(crate) async fn declare(pool: &Pool, defs: &[ScheduleDef]) {
    driver(pool).schedule_sync(ScheduleSyncParams { defs, retire_others: false }).await.expect("schedules");
}

/// Schedule `name`, if it exists.
pub(crate) async fn schedule(pool: &Pool, name: &str) -> Option<ScheduleRow> {
    driver(pool).schedule_get(ScheduleGetParams { name }).await.expect("schedule")
}

/// Inserts `n` jobs and returns their ids.
pub(crate) async fn insert(pool: &Pool, jobs: Vec<NewJob>) -> Vec<i64> {
    let mut conn = pool.get().await.expect("conn");
    jobs_core::postgres::connection::insert_many(&mut conn, &jobs, None)
        .await
        .expect("insert")
        .iter()
        .map(|i| i.id)
        .collect()
}

/// Marks a job discarded with one recorded error (as a worker would).
pub(crate) async fn fail(pool: &Pool, id: i64, message: &str) {
    let mut conn = pool.get().await.expect("conn");
    let errors = serde_json::json!([{
        "attempt": 1, "at": "2026-11-22T10:00:01Z", "attempted_at": "2026-11-22T10:00:00Z",
        "node": "node-a", "error_type": "panic", "message": message, "backtrace": "at shop::charge (src/lib.rs:62)"
    }]);
    diesel::update(jobs::table.find(id))
        .set((
            jobs::state.eq(JobState::Discarded),
            jobs::attempt.eq(1),
            jobs::attempted_at.eq(diesel::dsl::now),
            jobs::finalized_at.eq(diesel::dsl::now),
            jobs::attempted_by.eq(vec!["node-a".to_owned()]),
            jobs::errors.eq(errors),
        ))
        .execute(&mut conn)
        .await
        .expect("fail job");
}

pub(crate) async fn state_of(pool: &Pool, id: i64) -> Option<JobState> {
    let mut conn = pool.get().await.expect("conn");
    jobs_core::get_job(&mut conn, id).await.expect("get").map(|j| j.state)
}

pub(crate) async fn body_text(response: ServiceResponse<impl MessageBody>) -> String {
    let bytes = test::read_body(response).await;
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// The dashboard mounted at `/admin/jobs`, with `access` for every request.
pub(crate) async fn app(
    pool: &Pool,
    access: Access,
) -> impl Service<actix_http::Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error>
{
    app_on(pool.clone(), access).await
}

/// The dashboard at `/admin/jobs` on `driver`, every request given `access`.
pub(crate) async fn app_on(
    driver: impl IntoDriver,
    access: Access,
) -> impl Service<actix_http::Request, Response = ServiceResponse<impl MessageBody>, Error = actix_web::Error>
{
    let config = DashboardConfig::new(driver).authorize(move |_: &actix_web::HttpRequest| access);
    test::init_service(App::new().service(jobs_dashboard::scope("/admin/jobs", config))).await
}

/// GETs a page, returning status, body, and the CSRF cookie's value if one was set.
pub(crate) async fn get<S, B>(app: &S, uri: &str) -> (StatusCode, String, Option<String>)
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let response = test::call_service(app, test::TestRequest::get().uri(uri).to_request()).await;
    let status = response.status();
    let cookie = response
        .response()
        .cookies()
        .find(|c| c.name() == "jobs_dashboard_csrf")
        .map(|c| c.value().to_owned());
    (status, body_text(response).await, cookie)
}

/// POSTs a form with the CSRF cookie and field (unless `csrf` is `None`): status, body,
/// and where it redirects.
pub(crate) async fn post<S, B>(
    app: &S,
    uri: &str,
    csrf: Option<&str>,
    fields: &[(&str, &str)],
) -> (StatusCode, String, String)
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let posted = post_full(app, uri, csrf, fields).await;
    (posted.status, posted.body, posted.location)
}

/// What a POST answered.
pub(crate) struct Posted {
    pub(crate) status: StatusCode,
    pub(crate) body: String,
    pub(crate) location: String,
    /// The notice it left for the next page (its cookie, decoded).
    pub(crate) notice: Option<String>,
    /// That cookie as sent, to send back.
    pub(crate) notice_cookie: Option<actix_web::cookie::Cookie<'static>>,
}

/// [`post`], with the notice it left.
pub(crate) async fn post_full<S, B>(app: &S, uri: &str, csrf: Option<&str>, fields: &[(&str, &str)]) -> Posted
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let mut form = form_urlencoded::Serializer::new(String::new());
    if let Some(token) = csrf {
        form.append_pair("csrf", token);
    }
    for (k, v) in fields {
        form.append_pair(k, v);
    }
    let mut request = test::TestRequest::post()
        .uri(uri)
        .insert_header(("content-type", "application/x-www-form-urlencoded"))
        .set_payload(form.finish());
    if let Some(token) = csrf {
        request = request.cookie(actix_web::cookie::Cookie::new("jobs_dashboard_csrf", token.to_owned()));
    }
    let response = test::call_service(app, request.to_request()).await;
    let status = response.status();
    let location =
        response.headers().get("location").and_then(|l| l.to_str().ok()).unwrap_or_default().to_owned();
    let notice_cookie =
        response.response().cookies().find(|c| c.name() == NOTICE_COOKIE).map(|c| c.into_owned());
    let notice = notice_cookie.as_ref().and_then(|c| {
        form_urlencoded::parse(format!("n={}", c.value()).as_bytes()).map(|(_, v)| v.into_owned()).next()
    });
    Posted { status, body: body_text(response).await, location, notice, notice_cookie }
}

/// The cookie a notice travels in.
pub(crate) const NOTICE_COOKIE: &str = "jobs_dashboard_notice";

/// GETs a page sending `cookie`: status, body, and whether the response clears the notice.
pub(crate) async fn get_with<S, B>(
    app: &S,
    uri: &str,
    cookie: actix_web::cookie::Cookie<'static>,
) -> (StatusCode, String, bool)
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    let response =
        test::call_service(app, test::TestRequest::get().uri(uri).cookie(cookie).to_request()).await;
    let status = response.status();
    let cleared = response.response().cookies().any(|c| c.name() == NOTICE_COOKIE && c.value().is_empty());
    (status, body_text(response).await, cleared)
}

pub(crate) async fn token<S, B>(app: &S) -> String
where
    S: Service<actix_http::Request, Response = ServiceResponse<B>, Error = actix_web::Error>,
    B: MessageBody,
{
    get(app, "/admin/jobs/").await.2.expect("a CSRF cookie on first visit")
}
