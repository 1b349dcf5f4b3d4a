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
    /// A value of the application's: its pattern, its type as written, and `X` of
    /// `Data<X>`.
    Data(Box<DataParam>),
}

/// A `Data<X>` parameter: its pattern, its type as written, and `X`.
pub(crate) struct DataParam {
    pub(crate) pat: Pat,
    pub(crate) ty: Type,
    pub(crate) inner: Type,
}

/// `X`, when `ty` is `Data<X>` (by any path: `Data<X>`, `jobs_core::Data<X>`).
fn data_type(ty: &Type) -> Option<Type> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last().filter(|s| p.qself.is_none() && s.ident == "Data")?;
    let syn::PathArguments::AngleBracketed(generics) = &last.arguments else { return None };
    match generics.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(inner)] => Some(inner.clone()),
        _ => None,
    }
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
            if let Some(inner) = data_type(&ty) {
                params.push(Param::Data(Box::new(DataParam { pat, ty, inner })));
            } else if args.is_some() || !params.is_empty() {
                return Err(syn::Error::new(
                    input.span(),
                    "a job takes `ctx: JobContext`, then at most one arguments value (put several \
                     values in a struct), then values of the application's as `Data<T>` \
                     parameters (registered with `.data(value)` on the worker builder)",
                ));
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
