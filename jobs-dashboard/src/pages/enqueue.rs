//! Enqueue a job from the dashboard: a kind that a live node runs, its arguments as JSON
//! (checked against the kind's argument type when the kind is registered in this
//! process too), queue, priority, attempts and when to run. What the form leaves blank
//! comes from the kind's options (`#[job(...)]`: attempts, timeout, priority, tags,
//! uniqueness), as its live nodes declare them.

use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, web};
use askama::Template;
use jobs_core::{JobOptions, KindRequest, NewJob, Registry};

use crate::config::Dashboard;
use crate::error::DashboardError;
use crate::liveness::KindChoice;
use crate::view::{self, PageCtx};
use crate::{actions, liveness, params};

#[derive(Template)]
#[template(path = "enqueue.html")]
struct EnqueuePage {
    c: PageCtx,
    kinds: Vec<KindChoice>,
    all_queues: Vec<String>,
    /// The form as posted, to show again with its error.
    form: Form,
    /// The chosen kind's options, what blank fields take.
    declared: Option<Declared>,
    error: Option<String>,
}

/// A kind's options as the form shows them.
struct Declared {
    priority: String,
    max_attempts: String,
    /// The rest, in words: timeout, tags, uniqueness.
    rest: String,
}

impl Declared {
    fn of(options: &JobOptions) -> Declared {
        let mut rest = Vec::new();
        if let Some(timeout) = options.timeout {
            rest.push(format!("timeout {}", humantime::format_duration(timeout)));
        }
        if !options.tags.is_empty() {
            rest.push(format!("tags {}", options.tags.join(", ")));
        }
        if let Some(unique) = &options.unique {
            rest.push(match &unique.by {
                jobs_core::UniqueBy::Kind => "unique by kind".to_owned(),
                jobs_core::UniqueBy::Args => "unique by arguments".to_owned(),
                jobs_core::UniqueBy::Fields(fields) => format!("unique by {}", fields.join(", ")),
                jobs_core::UniqueBy::Key(key) => format!("unique by key {key}"),
            });
        }
        Declared {
            priority: options.priority.to_string(),
            max_attempts: options.max_attempts.to_string(),
            rest: rest.join("; "),
        }
    }
}

/// The form's fields.
#[derive(Default)]
pub(crate) struct Form {
    pub(crate) kind: String,
    pub(crate) queue: String,
    pub(crate) args: String,
    pub(crate) priority: String,
    pub(crate) max_attempts: String,
    pub(crate) run_at: String,
}

fn render(
    req: &HttpRequest,
    d: &web::Data<Dashboard>,
    kinds: Vec<KindChoice>,
    form: Form,
    error: Option<String>,
) -> Result<HttpResponse, DashboardError> {
    let mut c = PageCtx::new(req, d, "jobs")?;
    let mut all_queues: Vec<String> = kinds.iter().flat_map(|k| k.queues.iter().cloned()).collect();
    all_queues.sort();
    all_queues.dedup();
    let declared =
        kinds.iter().find(|k| k.kind == form.kind).and_then(|k| k.options.as_ref()).map(Declared::of);
    let cookies = c.take_cookies();
    let status = if error.is_some() {
        actix_web::http::StatusCode::BAD_REQUEST
    } else {
        actix_web::http::StatusCode::OK
    };
    let mut response = view::respond(&EnqueuePage { c, kinds, all_queues, form, declared, error }, cookies)?;
    *response.status_mut() = status;
    Ok(response)
}

/// `GET /jobs/new`: the form.
pub(crate) async fn page(req: HttpRequest, d: web::Data<Dashboard>) -> Result<HttpResponse, DashboardError> {
    let kinds = liveness::live_kinds(&*d.config.driver).await?;
    let pairs = params::pairs(req.query_string().as_bytes());
    let kind = params::value(&pairs, "kind").unwrap_or_default().to_owned();
    let queue = kinds
        .iter()
        .find(|k| k.kind == kind)
        .and_then(|k| k.default_queue().map(str::to_owned).or_else(|| k.queues.first().cloned()))
        .unwrap_or_default();
    let form = Form { kind, queue, args: "{}".into(), ..Form::default() };
    render(&req, &d, kinds, form, None)
}

/// `POST /jobs/new`: checks the form, enqueues, and opens the new job. A mistake shows the
/// form again, as typed, with what is wrong (a 400).
pub(crate) async fn submit(
    req: HttpRequest,
    d: web::Data<Dashboard>,
    body: Bytes,
) -> Result<HttpResponse, DashboardError> {
    let fields = actions::authorize_post(&req, &d, &body)?;
    let field = |k: &str| params::value(&fields, k).unwrap_or_default().to_owned();
    let form = Form {
        kind: field("kind"),
        queue: field("queue"),
        args: params::value(&fields, "args").unwrap_or("null").to_owned(),
        priority: field("priority"),
        max_attempts: field("max_attempts"),
        run_at: field("run_at"),
    };
    let kinds = liveness::live_kinds(&*d.config.driver).await?;
    let job = match build(&form, &kinds) {
        Ok(job) => job,
        Err(error) => return render(&req, &d, kinds, form, Some(error)),
    };
    let enqueued = match jobs_core::enqueue_many(&d.config.driver, [job]).await {
        Ok(enqueued) => enqueued,
        Err(
            e @ (jobs_core::Error::InvalidOption { .. }
            | jobs_core::Error::PayloadTooLarge { .. }
            | jobs_core::Error::NulInPayload { .. }),
        ) => return render(&req, &d, kinds, form, Some(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    let Some(job) = enqueued.first() else {
        return render(&req, &d, kinds, form, Some("nothing was inserted".into()));
    };
    if !job.existing {
        actions::audit(
            &req,
            &d,
            "job.enqueue",
            format!("job {} ({} on {})", job.id, form.kind, form.queue),
            1,
        );
    }
    let notice = if job.existing {
        format!("job {} already exists with this uniqueness key: nothing enqueued", job.id)
    } else {
        format!("job {} enqueued", job.id)
    };
    Ok(actions::back(&d, &[], format!("{}/jobs/{}", d.base, job.id), &notice))
}

/// The job the form describes, with the kind's options where it leaves a field blank, or
/// what is wrong with it.
fn build(form: &Form, kinds: &[KindChoice]) -> Result<NewJob, String> {
    let Some(choice) = kinds.iter().find(|k| k.kind == form.kind) else {
        return Err(if form.kind.is_empty() {
            "choose a kind".into()
        } else {
            format!("no live node runs kind `{}`: start a worker that registers it, then enqueue", form.kind)
        });
    };
    let args: serde_json::Value =
        serde_json::from_str(&form.args).map_err(|e| format!("the arguments are not valid JSON: {e}"))?;
    if let Some(descriptor) =
        Registry::from_inventory().ok().as_ref().and_then(|r| r.get(&form.kind).copied())
    {
        (descriptor.check_args)(&args.to_string())?;
    }
    let mut request = KindRequest::new(&form.kind, args).queue(&form.queue);
    if !form.priority.is_empty() {
        request = request.priority(
            form.priority
                .parse()
                .map_err(|_| format!("priority must be a small integer, not `{}`", form.priority))?,
        );
    }
    if !form.max_attempts.is_empty() {
        request = request.max_attempts(
            form.max_attempts
                .parse()
                .map_err(|_| format!("attempts must be a number, not `{}`", form.max_attempts))?,
        );
    }
    if !form.run_at.is_empty() {
        request = request.run_at(params::time("run_at", &form.run_at).map_err(|e| e.to_string())?);
    }
    request.to_new_job(choice.options.clone().unwrap_or_default()).map_err(|e| e.to_string())
}
