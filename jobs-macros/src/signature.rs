//! Reading the handler `#[job]` is put on: `async fn name(ctx: JobContext[, args: T][, x:
//! Data<X>]...) -> Result<..>`, checked so that mistakes are compile errors pointing at the
//! offending token.

use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, Pat, ReturnType, Type};

/// The handler: `async fn name(ctx: JobContext[, args: T][, x: Data<X>]...) -> Result<..>`.
pub(crate) struct JobFn {
    pub(crate) item: ItemFn,
    pub(crate) ctx: (Pat, Type),
    pub(crate) args: Option<(Pat, Type)>,
    /// The parameters after the context, in order: the arguments, or a value of the
    /// application's (`Data<X>`, with `X`).
    pub(crate) params: Vec<Param>,
    pub(crate) ret: Type,
}

/// A parameter after the context.
pub(crate) enum Param {
    /// The job's arguments.
    Args,
    /// A value of the application's.
    Data(Box<DataParam>),
}

/// A `Data<X>` parameter: its pattern and its type as written.
pub(crate) struct DataParam {
    pub(crate) pat: Pat,
    pub(crate) ty: Type,
}

/// Whether `ty` is spelled `Data<X>` (by any path: `Data<X>`, `jobs_core::Data<X>`): a
/// value of the application's. The expansion reads it through `jobs_core::FromAppData`,
/// so another type spelled so is reported at the parameter.
fn is_data(ty: &Type) -> bool {
    let Type::Path(p) = ty else { return false };
    let Some(last) = p.path.segments.last().filter(|s| p.qself.is_none() && s.ident == "Data") else {
        return false;
    };
    matches!(&last.arguments, syn::PathArguments::AngleBracketed(g) if g.args.len() == 1)
}

fn typed_param(arg: &FnArg, role: &str) -> syn::Result<(Pat, Type)> {
    match arg {
        FnArg::Typed(pt) => Ok(((*pt.pat).clone(), (*pt.ty).clone())),
        FnArg::Receiver(r) => {
            Err(syn::Error::new(r.span(), format!("a job is a free function; expected {role}")))
        }
    }
}

impl JobFn {
    /// Checks the handler's shape.
    pub(crate) fn parse(item: ItemFn) -> syn::Result<JobFn> {
        let sig = &item.sig;
        if sig.asyncness.is_none() {
            return Err(syn::Error::new(sig.fn_token.span(), "#[job] needs an `async fn`"));
        }
        if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
            return Err(syn::Error::new(
                sig.generics.span(),
                "a job cannot be generic: each kind needs one concrete argument type",
            ));
        }
        if let Some(v) = &sig.variadic {
            return Err(syn::Error::new(v.span(), "a job cannot be variadic"));
        }
        let mut inputs = sig.inputs.iter();
        let ctx = match inputs.next() {
            Some(arg) => typed_param(arg, "`ctx: JobContext`")?,
            None => {
                return Err(syn::Error::new(
                    sig.paren_token.span.join(),
                    "a job takes `ctx: JobContext` first, then optionally its arguments",
                ));
            }
        };
        if !is_job_context(&ctx.1) {
            return Err(syn::Error::new(
                ctx.1.span(),
                "the first parameter of a job is its context: add `ctx: JobContext` before the \
                 arguments (`_ctx: JobContext` if the job does not use it), e.g. \
                 `async fn send(_ctx: JobContext, args: Welcome)`",
            ));
        }
        let (mut args, mut params) = (None, Vec::new());
        for input in inputs {
            let (pat, ty) = typed_param(input, "the job's arguments or a `Data<T>` value")?;
            if is_data(&ty) {
                params.push(Param::Data(Box::new(DataParam { pat, ty })));
            } else if args.is_some() || !params.is_empty() {
                let message = if args.is_some() {
                    "a job takes `ctx: JobContext`, then at most one arguments value (put several \
                     values in a struct), then values of the application's as `Data<T>` \
                     parameters (registered with `.data(value)` on the worker builder)"
                } else {
                    "the job's arguments come before its `Data<T>` parameters: \
                     `async fn name(ctx: JobContext, args: T, value: Data<V>)`"
                };
                return Err(syn::Error::new(input.span(), message));
            } else {
                args = Some((pat, ty));
                params.push(Param::Args);
            }
        }
        let ret = match &sig.output {
            ReturnType::Type(_, ty) => (**ty).clone(),
            ReturnType::Default => {
                return Err(syn::Error::new(
                    sig.ident.span(),
                    "a job returns a `Result<T, E>`: `Ok` completes the job, `Err` fails the attempt",
                ));
            }
        };
        Ok(JobFn { item, ctx, args, params, ret })
    }
}

/// Whether `ty` names `JobContext` (by any path: `JobContext`, `jobs_core::JobContext`).
fn is_job_context(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "JobContext"))
}
