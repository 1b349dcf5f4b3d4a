//! Reading `#[job(...)]`: the attribute's options (the handler's signature is
//! `signature.rs`), checked here so that mistakes are compile errors pointing at the offending token.

use std::str::FromStr;
use std::time::Duration;

use proc_macro2::{Span, TokenStream};
use syn::meta::ParseNestedMeta;
use syn::parse::Parser;
use syn::{Ident, LitInt, LitStr, Path};

/// The states a unique key may be scoped to, as written in the attribute.
pub(crate) const STATE_NAMES: [&str; 8] =
    ["pending", "available", "scheduled", "running", "retryable", "completed", "discarded", "cancelled"];

/// A retry policy from `backoff = ...`.
pub(crate) enum BackoffSpec {
    Polynomial,
    Exponential { base: Duration, max: Duration },
    Linear { step: Duration, max: Duration },
    Constant(Duration),
    Custom(Path),
}

/// What `unique(...)` compares.
pub(crate) enum UniqueBySpec {
    Kind,
    Args,
    Fields(Vec<String>),
    Key(String),
}

/// `unique(...)`.
pub(crate) struct UniqueSpec {
    pub(crate) by: UniqueBySpec,
    pub(crate) period: Option<Duration>,
    pub(crate) states: Option<Vec<String>>,
    pub(crate) by_queue: bool,
}

/// `cron = "..."` with its companions.
pub(crate) struct CronSpec {
    pub(crate) expression: String,
    pub(crate) timezone: String,
    pub(crate) run_latest: bool,
}

/// Everything inside `#[job(...)]`.
#[derive(Default)]
pub(crate) struct JobAttr {
    pub(crate) krate: Option<Path>,
    pub(crate) kind: Option<String>,
    pub(crate) queue: Option<String>,
    pub(crate) priority: Option<i16>,
    pub(crate) max_attempts: Option<i32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) backoff: Option<BackoffSpec>,
    pub(crate) unique: Option<UniqueSpec>,
    pub(crate) tags: Vec<String>,
    pub(crate) cron: Option<CronSpec>,
    pub(crate) limit: Option<u32>,
    pub(crate) partition_by: Option<PartitionSpec>,
}

/// `partition_by = "..."`: an argument field (a dotted path), or `"meta.<name>"`.
pub(crate) enum PartitionSpec {
    Arg(Vec<String>, Span),
    Meta(String),
}

/// The most a declared limit may be (the engine's cap on a queue's concurrency).
const MAX_LIMIT: u32 = 100_000;

fn parse_partition(lit: &LitStr) -> syn::Result<PartitionSpec> {
    let value = lit.value();
    if let Some(name) = value.strip_prefix("meta.") {
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(syn::Error::new(
                lit.span(),
                "`partition_by = \"meta.<name>\"` needs a metadata name",
            ));
        }
        return Ok(PartitionSpec::Meta(name.to_owned()));
    }
    let path: Vec<String> = value.split('.').map(str::to_owned).collect();
    if path.iter().any(|f| syn::parse_str::<Ident>(f).is_err() && f.parse::<usize>().is_err()) {
        return Err(syn::Error::new(
            lit.span(),
            "`partition_by` names a field of the arguments (`\"customer_id\"`, `\"customer.id\"`) or a \
             metadata entry (`\"meta.tenant\"`)",
        ));
    }
    Ok(PartitionSpec::Arg(path, lit.span()))
}

fn duration(lit: &LitStr) -> syn::Result<Duration> {
    let d = humantime::parse_duration(&lit.value()).map_err(|e| {
        syn::Error::new(
            lit.span(),
            format!("`{}` is not a duration ({e}); write e.g. \"30s\", \"5m\", \"1h 30m\"", lit.value()),
        )
    })?;
    if d.is_zero() {
        return Err(syn::Error::new(lit.span(), "the duration must be longer than zero"));
    }
    Ok(d)
}

fn set_once<T>(slot: &mut Option<T>, value: T, meta: &ParseNestedMeta<'_>, name: &str) -> syn::Result<()> {
    if slot.is_some() {
        return Err(meta.error(format!("`{name}` is given twice")));
    }
    *slot = Some(value);
    Ok(())
}

fn is_tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '/')
}

/// Accepts standard five-field cron (minute first), or six/seven fields with seconds first,
/// and `@hourly`-style shorthands. Returns the expression the `cron` crate understands.
pub(crate) fn normalize_cron(expression: &str) -> Result<String, String> {
    let trimmed = expression.trim();
    let full = if trimmed.starts_with('@') || trimmed.split_whitespace().count() != 5 {
        trimmed.to_owned()
    } else {
        format!("0 {trimmed}")
    };
    cron::Schedule::from_str(&full).map(|_| full).map_err(|e| e.to_string())
}

fn parse_backoff(meta: &ParseNestedMeta<'_>) -> syn::Result<BackoffSpec> {
    let input = meta.value()?;
    let name: Ident = input.parse()?;
    let policy = name.to_string();
    if policy == "polynomial" {
        return Ok(BackoffSpec::Polynomial);
    }
    if !matches!(policy.as_str(), "constant" | "custom" | "exponential" | "linear") {
        return Err(syn::Error::new(
            name.span(),
            format!(
                "unknown backoff `{policy}`; use polynomial, exponential(base = .., max = ..), \
                 linear(step = .., max = ..), constant(\"..\") or custom(path::to::fn)"
            ),
        ));
    }
    let content;
    syn::parenthesized!(content in input);
    let body: TokenStream = content.parse()?;
    match policy.as_str() {
        "constant" => {
            let lit: LitStr = syn::parse2(body)?;
            Ok(BackoffSpec::Constant(duration(&lit)?))
        }
        "custom" => Ok(BackoffSpec::Custom(syn::parse2(body)?)),
        "exponential" | "linear" => {
            let first_name = if policy == "exponential" { "base" } else { "step" };
            let (mut first, mut max) = (None, None);
            syn::meta::parser(|m| {
                if m.path.is_ident(first_name) {
                    set_once(&mut first, duration(&m.value()?.parse()?)?, &m, first_name)
                } else if m.path.is_ident("max") {
                    set_once(&mut max, duration(&m.value()?.parse()?)?, &m, "max")
                } else {
                    Err(m.error(format!("`{policy}` takes `{first_name} = \"..\"` and `max = \"..\"`")))
                }
            })
            .parse2(body)?;
            let first = first.ok_or_else(|| {
                syn::Error::new(name.span(), format!("`{policy}` needs `{first_name} = \"..\"`"))
            })?;
            let max = max.unwrap_or(Duration::from_secs(24 * 3600));
            if max < first {
                return Err(syn::Error::new(name.span(), format!("`max` must be at least `{first_name}`")));
            }
            Ok(if policy == "exponential" {
                BackoffSpec::Exponential { base: first, max }
            } else {
                BackoffSpec::Linear { step: first, max }
            })
        }
        _ => Err(syn::Error::new(name.span(), "unknown backoff")),
    }
}

fn parse_unique(meta: &ParseNestedMeta<'_>) -> syn::Result<UniqueSpec> {
    let mut spec = UniqueSpec { by: UniqueBySpec::Args, period: None, states: None, by_queue: false };
    if meta.input.is_empty() || meta.input.peek(syn::Token![,]) {
        return Ok(spec);
    }
    let mut by: Option<UniqueBySpec> = None;
    meta.parse_nested_meta(|m| {
        if m.path.is_ident("args") {
            set_once(&mut by, UniqueBySpec::Args, &m, "what makes jobs unique")
        } else if m.path.is_ident("kind") {
            set_once(&mut by, UniqueBySpec::Kind, &m, "what makes jobs unique")
        } else if m.path.is_ident("key") {
            let lit: LitStr = m.value()?.parse()?;
            set_once(&mut by, UniqueBySpec::Key(lit.value()), &m, "what makes jobs unique")
        } else if m.path.is_ident("fields") {
            let mut fields = Vec::new();
            m.parse_nested_meta(|f| {
                let ident = f.path.get_ident().ok_or_else(|| f.error("expected a field name"))?;
                fields.push(ident.to_string().trim_start_matches("r#").to_owned());
                Ok(())
            })?;
            if fields.is_empty() {
                return Err(m.error("`fields(...)` needs at least one field name"));
            }
            set_once(&mut by, UniqueBySpec::Fields(fields), &m, "what makes jobs unique")
        } else if m.path.is_ident("period") {
            set_once(&mut spec.period, duration(&m.value()?.parse()?)?, &m, "period")
        } else if m.path.is_ident("by_queue") {
            spec.by_queue = true;
            Ok(())
        } else if m.path.is_ident("states") {
            let mut states = Vec::new();
            m.parse_nested_meta(|s| {
                let name = s.path.get_ident().map(Ident::to_string).unwrap_or_default();
                if !STATE_NAMES.contains(&name.as_str()) {
                    return Err(
                        s.error(format!("unknown job state; expected one of {}", STATE_NAMES.join(", ")))
                    );
                }
                states.push(name);
                Ok(())
            })?;
            if states.is_empty() {
                return Err(m.error("`states(...)` needs at least one state"));
            }
            set_once(&mut spec.states, states, &m, "states")
        } else {
            Err(m.error(
                "unknown `unique` option; expected args, kind, fields(..), key = \"..\", period = \"..\", \
                 states(..) or by_queue",
            ))
        }
    })?;
    if let Some(by) = by {
        spec.by = by;
    }
    Ok(spec)
}

impl JobAttr {
    /// Parses the attribute's arguments.
    pub(crate) fn parse(args: TokenStream) -> syn::Result<JobAttr> {
        let mut attr = JobAttr::default();
        let (mut cron_expr, mut cron_tz, mut cron_missed): (Option<LitStr>, Option<LitStr>, Option<LitStr>) =
            (None, None, None);
        syn::meta::parser(|meta| {
            let Some(name) = meta.path.get_ident().map(Ident::to_string) else {
                return Err(meta.error("expected an option name"));
            };
            match name.as_str() {
                "crate" => set_once(&mut attr.krate, meta.value()?.parse()?, &meta, "crate"),
                "kind" => {
                    let lit: LitStr = meta.value()?.parse()?;
                    if lit.value().trim().is_empty() || lit.value().len() > 255 {
                        return Err(syn::Error::new(lit.span(), "a kind is 1 to 255 characters"));
                    }
                    set_once(&mut attr.kind, lit.value(), &meta, "kind")
                }
                "queue" => {
                    let lit: LitStr = meta.value()?.parse()?;
                    let q = lit.value();
                    if q.is_empty() || q.chars().count() > 128 || q.chars().any(char::is_control) {
                        return Err(syn::Error::new(lit.span(), "queue names are 1 to 128 printable characters"));
                    }
                    set_once(&mut attr.queue, q, &meta, "queue")
                }
                "priority" => {
                    let lit: LitInt = meta.value()?.parse()?;
                    let p = lit
                        .base10_parse::<i16>()
                        .map_err(|_| syn::Error::new(lit.span(), "priority is an i16 (lower runs first)"))?;
                    set_once(&mut attr.priority, p, &meta, "priority")
                }
                "max_attempts" => {
                    let lit: LitInt = meta.value()?.parse()?;
                    let n = lit.base10_parse::<i32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                        syn::Error::new(lit.span(), "max_attempts is a whole number of at least 1")
                    })?;
                    set_once(&mut attr.max_attempts, n, &meta, "max_attempts")
                }
                "timeout" => set_once(&mut attr.timeout, duration(&meta.value()?.parse()?)?, &meta, "timeout"),
                "backoff" => {
                    let spec = parse_backoff(&meta)?;
                    set_once(&mut attr.backoff, spec, &meta, "backoff")
                }
                "unique" => {
                    let spec = parse_unique(&meta)?;
                    set_once(&mut attr.unique, spec, &meta, "unique")
                }
                "tags" => {
                    let value = meta.value()?;
                    let content;
                    syn::bracketed!(content in value);
                    let lits = content.parse_terminated(<LitStr as syn::parse::Parse>::parse, syn::Token![,])?;
                    for lit in lits {
                        let t = lit.value();
                        if t.is_empty() || t.len() > 100 || !t.chars().all(is_tag_char) {
                            return Err(syn::Error::new(
                                lit.span(),
                                "tags are 1 to 100 characters of letters, digits and _ - . : /",
                            ));
                        }
                        attr.tags.push(t);
                    }
                    Ok(())
                }
                "limit" => {
                    let lit: LitInt = meta.value()?.parse()?;
                    let n = lit.base10_parse::<u32>().ok().filter(|n| (1..=MAX_LIMIT).contains(n)).ok_or_else(|| {
                        syn::Error::new(lit.span(), format!("limit is a whole number from 1 to {MAX_LIMIT}"))
                    })?;
                    set_once(&mut attr.limit, n, &meta, "limit")
                }
                "partition_by" => {
                    let spec = parse_partition(&meta.value()?.parse()?)?;
                    set_once(&mut attr.partition_by, spec, &meta, "partition_by")
                }
                "cron" => set_once(&mut cron_expr, meta.value()?.parse()?, &meta, "cron"),
                "cron_tz" => set_once(&mut cron_tz, meta.value()?.parse()?, &meta, "cron_tz"),
                "cron_missed" => set_once(&mut cron_missed, meta.value()?.parse()?, &meta, "cron_missed"),
                _ => Err(meta.error(format!(
                    "unknown option `{name}`; expected kind, queue, priority, max_attempts, timeout, backoff, \
                     unique, tags, limit, partition_by, cron, cron_tz, cron_missed or crate"
                ))),
            }
        })
        .parse2(args)?;

        match cron_expr {
            None => {
                if let Some(lit) = cron_tz.as_ref().or(cron_missed.as_ref()) {
                    return Err(syn::Error::new(
                        lit.span(),
                        "`cron_tz` and `cron_missed` need `cron = \"...\"`",
                    ));
                }
            }
            Some(lit) => {
                let expression = normalize_cron(&lit.value())
                    .map_err(|e| syn::Error::new(lit.span(), format!("invalid cron expression: {e}")))?;
                let timezone = match cron_tz {
                    None => "UTC".to_owned(),
                    Some(tz) => {
                        tz.value().parse::<chrono_tz::Tz>().map_err(|_| {
                            syn::Error::new(
                                tz.span(),
                                "unknown time zone; use an IANA name such as \"Europe/Paris\"",
                            )
                        })?;
                        tz.value()
                    }
                };
                let run_latest = match cron_missed.as_ref().map(LitStr::value).as_deref() {
                    None | Some("skip") => false,
                    Some("run_latest") => true,
                    Some(_) => {
                        let span = cron_missed.as_ref().map_or_else(Span::call_site, LitStr::span);
                        return Err(syn::Error::new(span, "cron_missed is \"skip\" or \"run_latest\""));
                    }
                };
                attr.cron = Some(CronSpec { expression, timezone, run_latest });
            }
        }
        Ok(attr)
    }
}

#[cfg(test)]
mod tests {
    use super::normalize_cron;

    #[test]
    fn five_field_cron_gets_a_seconds_field() {
        assert_eq!(normalize_cron("*/5 * * * *").as_deref(), Ok("0 */5 * * * *"));
        assert_eq!(normalize_cron("30 0 9 * * Mon-Fri").as_deref(), Ok("30 0 9 * * Mon-Fri"));
        assert_eq!(normalize_cron("@hourly").as_deref(), Ok("@hourly"));
        assert!(normalize_cron("61 * * * *").is_err());
        assert!(normalize_cron("every day").is_err());
    }
}
