//! The dashboard under abuse, against a real Postgres: script injected through every
//! field a job carries is rendered inert, every mutation needs its CSRF token and full
//! access, thousands of generated query strings never produce a 5xx, and filters full of
//! SQL metacharacters match literally and harm nothing.

mod test_app;

use actix_web::http::StatusCode;
use actix_web::test;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use jobs_core::JobState;
use jobs_core::NewJob;
use jobs_core::driver::ScheduleDef;
use jobs_core::postgres::Pool;
use jobs_core::postgres::schema::jobs_all;
use jobs_core::testing::TestDatabase;
use jobs_dashboard::Access;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use test_app::{app, fail, get, insert, post, token};

/// Markup that would run script if it reached the page unescaped.
const XSS: [&str; 4] = [
    "<script>window.__xss=1</script>",
    "\"><img src=x onerror=\"window.__xss=2\">",
    "'><svg onload=window.__xss=3>",
    "javascript:window.__xss=4",
];

async fn rows(pool: &Pool) -> Vec<(i64, JobState)> {
    let mut conn = pool.get().await.expect("conn");
    jobs_all::table
        .select((jobs_all::id, jobs_all::state))
        .order(jobs_all::id)
        .load(&mut conn)
        .await
        .expect("rows")
}

/// A queue, a kind, args, meta, an error and a cron schedule, each carrying script.
async fn poisoned(pool: &Pool) -> Vec<i64> {
    let mut jobs = Vec::new();
    for (i, payload) in XSS.iter().enumerate() {
        let mut job = NewJob::new(
            *payload,
            format!("q{i}{payload}"),
            serde_json::json!({ "html": payload }).to_string(),
        );
        job.meta = serde_json::json!({ "note": payload }).to_string().into();
        jobs.push(job);
    }
    let ids = insert(pool, jobs).await;
    for (id, payload) in ids.iter().zip(XSS) {
        fail(pool, *id, payload).await;
    }
    let defs: Vec<ScheduleDef> = XSS
        .iter()
        .map(|payload| ScheduleDef {
            name: format!("cron{payload}"),
            expression: "0 0 3 * * *".into(),
            timezone: "UTC".into(),
            kind: (*payload).into(),
            args: serde_json::json!({ "html": payload }).to_string(),
            options: serde_json::json!({}),
            missed_policy: "skip".into(),
        })
        .collect();
    test_app::declare(pool, &defs).await;
    ids
}

#[actix_web::test]
async fn script_in_any_field_is_rendered_as_text() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = poisoned(&pool).await;
    let app = app(&pool, Access::Full).await;
    let mut pages = vec![
        "/admin/jobs/".to_owned(),
        "/admin/jobs/jobs".to_owned(),
        "/admin/jobs/jobs?state=discarded".to_owned(),
        "/admin/jobs/queues".to_owned(),
        "/admin/jobs/cron".to_owned(),
    ];
    pages.extend(ids.iter().map(|id| format!("/admin/jobs/jobs/{id}")));
    // The payloads also come back through filters, search and notices.
    for payload in XSS {
        let encoded: String = form_urlencoded::byte_serialize(payload.as_bytes()).collect();
        pages.push(format!("/admin/jobs/jobs?kind={encoded}&queue={encoded}&tag=x"));
        pages.push(format!("/admin/jobs/jobs?q=html%3D{encoded}"));
        pages.push(format!("/admin/jobs/jobs?state={encoded}"));
        pages.push(format!("/admin/jobs/jobs/{}?notice={encoded}", ids[0]));
    }
    for page in &pages {
        let (status, body, _) = get(&app, page).await;
        assert!(status.as_u16() < 500, "{page}: {status}");
        for payload in XSS {
            for needle in ["<script>window", "<img src=x", "<svg onload", "href=\"javascript:"] {
                assert!(!body.contains(needle), "{page} renders `{needle}` from {payload} unescaped");
            }
        }
    }
    // And the escaped text is there: the data is shown, not dropped.
    let (_, body, _) = get(&app, &format!("/admin/jobs/jobs/{}", ids[0])).await;
    assert!(body.contains("&#60;script&#62;window.__xss=1&#60;/script&#62;"), "{body}");
}

#[actix_web::test]
async fn every_mutation_needs_the_csrf_token_and_full_access() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = insert(&pool, vec![NewJob::new("mail", "mailers", "{}"); 3]).await;
    fail(&pool, ids[0], "boom").await;
    let def = ScheduleDef {
        name: "nightly".into(),
        expression: "0 0 3 * * *".into(),
        timezone: "UTC".into(),
        kind: "mail".into(),
        args: "{}".into(),
        options: serde_json::json!({}),
        missed_policy: "skip".into(),
    };
    test_app::declare(&pool, &[def]).await;
    let id = ids[0];
    let routes: Vec<(String, Vec<(&str, String)>)> = vec![
        (format!("/admin/jobs/jobs/{id}/retry"), vec![]),
        (format!("/admin/jobs/jobs/{id}/cancel"), vec![]),
        (format!("/admin/jobs/jobs/{id}/delete"), vec![]),
        ("/admin/jobs/jobs/bulk".into(), vec![("action", "delete".into()), ("ids", ids[1].to_string())]),
        (
            "/admin/jobs/jobs/bulk".into(),
            vec![("action", "delete".into()), ("all", "1".into()), ("confirm", "3".into())],
        ),
        ("/admin/jobs/queues/mailers/pause".into(), vec![]),
        ("/admin/jobs/queues/mailers/resume".into(), vec![]),
        ("/admin/jobs/cron/nightly/disable".into(), vec![]),
        ("/admin/jobs/cron/nightly/enable".into(), vec![]),
        ("/admin/jobs/cron/nightly/run".into(), vec![]),
    ];
    let before = rows(&pool).await;
    let schedule_before = test_app::schedule(&pool, "nightly").await;
    let full = app(&pool, Access::Full).await;
    let good = token(&full).await;
    let read_only = app(&pool, Access::ReadOnly).await;
    for (uri, fields) in &routes {
        let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        // No token at all.
        let (status, _, _) = post(&full, uri, None, &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri} without a token");
        // A token in the form that is not the cookie's (a forged cross-site post).
        let mut forged_fields = fields.clone();
        forged_fields.push(("csrf", "forged-token-value"));
        let mut form = form_urlencoded::Serializer::new(String::new());
        form.extend_pairs(forged_fields.iter());
        let forged = test::TestRequest::post()
            .uri(uri)
            .insert_header(("content-type", "application/x-www-form-urlencoded"))
            .cookie(actix_web::cookie::Cookie::new("jobs_dashboard_csrf", good.clone()))
            .set_payload(form.finish())
            .to_request();
        assert_eq!(test::call_service(&full, forged).await.status(), StatusCode::FORBIDDEN, "{uri} forged");
        // Read-only access with a valid token.
        let (status, _, _) = post(&read_only, uri, Some(&good), &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{uri} read-only");
    }
    assert_eq!(rows(&pool).await, before, "no job changed");
    assert!(!test_app::is_paused(&pool, "mailers").await);
    assert_eq!(test_app::schedule(&pool, "nightly").await, schedule_before);

    // The same posts with the token and full access do act (the checks above are not
    // rejecting everything).
    let (status, _, _) = post(&full, &format!("/admin/jobs/jobs/{id}/delete"), Some(&good), &[]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(rows(&pool).await.len(), before.len() - 1);
}

/// Values that break naive parsers and SQL builders.
const NASTY: &[&str] = &[
    "",
    " ",
    "'",
    "\"",
    "' OR '1'='1",
    "'; DROP TABLE jobs; --",
    "1; DELETE FROM jobs",
    "%",
    "_",
    "%%",
    "\\",
    "\\'",
    "`",
    "$1",
    "$$",
    "::text",
    "/*",
    "*/",
    "--",
    ";",
    "\u{0}",
    "a\u{0}b",
    "{",
    "}",
    "{\"a\":",
    "{\"a\":1}",
    "{\"a\":\"\\u0000\"}",
    "[]",
    "null",
    "true",
    "a=b=c",
    "=",
    "=1",
    "a=",
    "{\"$where\":1}",
    "0",
    "-1",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "99999999999999999999999",
    "1e308",
    "NaN",
    "-0",
    "0x10",
    "2026-11-22",
    "2026-13-45",
    "0000-01-01",
    "9999-12-31T23:59",
    "275760-09-13",
    "-4713-01-01",
    "2026-11-22T10:30",
    "2026-11-22T10:30:00+14:00",
    "available",
    "running",
    "completed",
    "discarded",
    "Discarded",
    "AVAILABLE",
    "<script>alert(1)</script>",
    "🙂",
    "é",
    "\u{202e}",
    "\u{feff}",
    "\r\n",
    "\t",
    "../../etc/passwd",
    "http://evil.example/",
    "//evil.example",
    "/admin/jobs/jobs",
];

const KEYS: &[&str] = &[
    "state",
    "queue",
    "kind",
    "tag",
    "q",
    "from",
    "to",
    "after",
    "before",
    "limit",
    "page",
    "per",
    "refresh",
    "notice",
    "return_to",
    "ids",
    "all",
    "confirm",
    "action",
    "sort",
    "order",
    "csrf",
    "x",
    "",
];

fn nasty_value(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        // Raw bytes, including invalid UTF-8 and control characters.
        0 => (0..rng.random_range(1..12)).map(|_| format!("%{:02X}", rng.random::<u8>())).collect(),
        // A long value.
        1 => "x".repeat(rng.random_range(1_000..20_000)),
        // Two corpus values glued.
        2 => format!(
            "{}{}",
            enc(NASTY[rng.random_range(0..NASTY.len())]),
            enc(NASTY[rng.random_range(0..NASTY.len())])
        ),
        _ => enc(NASTY[rng.random_range(0..NASTY.len())]),
    }
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

fn fuzzed_uri(rng: &mut StdRng, id: i64) -> String {
    let paths = [
        "/admin/jobs/".to_owned(),
        "/admin/jobs/jobs".to_owned(),
        format!("/admin/jobs/jobs/{id}"),
        format!("/admin/jobs/jobs/{}", enc(NASTY[rng.random_range(0..NASTY.len())])),
        "/admin/jobs/queues".to_owned(),
        "/admin/jobs/cron".to_owned(),
        format!("/admin/jobs/{}", enc(NASTY[rng.random_range(0..NASTY.len())])),
    ];
    let path = &paths[rng.random_range(0..paths.len())];
    let pairs: Vec<String> = (0..rng.random_range(0..6))
        .map(|_| {
            let key = if rng.random_bool(0.9) {
                enc(KEYS[rng.random_range(0..KEYS.len())])
            } else {
                nasty_value(rng)
            };
            match rng.random_range(0..12) {
                0 => key,                   // a key with no `=`
                1 => format!("{key}=%ZZ%"), // a broken escape
                _ => format!("{key}={}", nasty_value(rng)),
            }
        })
        .collect();
    if pairs.is_empty() { path.clone() } else { format!("{path}?{}", pairs.join("&")) }
}

#[actix_web::test]
async fn generated_query_strings_never_produce_a_server_error() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let ids = poisoned(&pool).await;
    insert(&pool, vec![NewJob::new("mail", "mailers", r#"{"user_id":7,"note":"50% off_now"}"#); 5]).await;
    let before = rows(&pool).await;
    let app = app(&pool, Access::Full).await;
    let mut rng = StdRng::seed_from_u64(0x5eed_2026_1122);
    let mut tried = 0;
    let mut statuses = std::collections::BTreeMap::new();
    while tried < 1_500 {
        let uri = fuzzed_uri(&mut rng, ids[0]);
        // A string the HTTP layer itself refuses never reaches the dashboard.
        let Ok(parsed) = uri.parse::<actix_web::http::Uri>() else { continue };
        let request = test::TestRequest::get().uri(&parsed.to_string()).to_request();
        let response = test::call_service(&app, request).await;
        let status = response.status();
        assert!(status.as_u16() < 500, "{uri} produced {status}: {}", test_app::body_text(response).await);
        *statuses.entry(status.as_u16()).or_insert(0) += 1;
        tried += 1;
    }
    println!("fuzzed {tried} query strings: statuses {statuses:?}");
    assert!(statuses.get(&200).is_some_and(|n| *n > 100), "many were valid: {statuses:?}");
    assert!(statuses.get(&400).is_some_and(|n| *n > 100), "many were refused as bad requests: {statuses:?}");
    assert_eq!(rows(&pool).await, before, "GETs changed nothing");
}

#[actix_web::test]
async fn filters_with_sql_metacharacters_match_literally_and_harm_nothing() {
    let db = TestDatabase::new().await.expect("db");
    let pool = db.pool(4).expect("pool");
    let tricky = ["o'brien", "50%_off", "a\\b", "'; DROP TABLE jobs; --"];
    let mut jobs: Vec<NewJob> = tricky
        .iter()
        .map(|k| NewJob::new(*k, "mailers", serde_json::json!({ "name": k }).to_string()))
        .collect();
    jobs.push(NewJob::new("plain", "mailers", r#"{"name":"plain"}"#));
    let ids = insert(&pool, jobs).await;
    for id in &ids {
        fail(&pool, *id, "x").await; // discarded: inside the indexed search states
    }
    let app = app(&pool, Access::Full).await;
    for (kind, id) in tricky.iter().zip(&ids) {
        let (status, body, _) = get(&app, &format!("/admin/jobs/jobs?kind={}", enc(kind))).await;
        assert_eq!(status, StatusCode::OK, "kind={kind}");
        assert!(body.contains(&format!("/admin/jobs/jobs/{id}\"")), "kind={kind} finds its own job");
        let others =
            ids.iter().filter(|other| *other != id && body.contains(&format!("/admin/jobs/jobs/{other}\"")));
        assert_eq!(others.count(), 0, "kind={kind} matches only itself (no wildcards, no injection)");
        let (status, body, _) =
            get(&app, &format!("/admin/jobs/jobs?state=discarded&q={}", enc(&format!("name={kind}")))).await;
        assert_eq!(status, StatusCode::OK, "q=name={kind}");
        assert!(body.contains(&format!("/admin/jobs/jobs/{id}\"")), "search name={kind} finds its job");
    }
    // Wildcards are not wildcards.
    let (_, body, _) = get(&app, "/admin/jobs/jobs?kind=%25").await;
    assert!(!ids.iter().any(|id| body.contains(&format!("/admin/jobs/jobs/{id}\""))), "`%` matches nothing");
    assert_eq!(rows(&pool).await.len(), ids.len(), "the table and its rows are intact");
}
