//! Writing the code for `#[job]`: a unit struct named after the function, its `Job`
//! implementation, typed enqueue shorthands, and the registry entry.

use std::time::Duration;

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::Path;
use syn::spanned::Spanned;

use crate::parse::{BackoffSpec, JobAttr, PartitionSpec, UniqueBySpec};
use crate::signature::{JobFn, Param};

fn duration(d: Duration) -> TokenStream {
    let (secs, nanos) = (d.as_secs(), d.subsec_nanos());
    quote!(::core::time::Duration::new(#secs, #nanos))
}

fn state_variant(name: &str) -> proc_macro2::Ident {
    let mut chars = name.chars();
    let camel: String = chars.next().map(|c| c.to_ascii_uppercase()).into_iter().chain(chars).collect();
    format_ident!("{}", camel)
}

fn options(krate: &Path, attr: &JobAttr) -> TokenStream {
    let mut calls = Vec::new();
    if let Some(queue) = &attr.queue {
        calls.push(quote!(.queue(#queue)));
    }
    if let Some(p) = attr.priority {
        calls.push(quote!(.priority(#p)));
    }
    if let Some(n) = attr.max_attempts {
        calls.push(quote!(.max_attempts(#n)));
    }
    if let Some(t) = attr.timeout {
        let t = duration(t);
        calls.push(quote!(.timeout(#t)));
    }
    if let Some(backoff) = &attr.backoff {
        let b = match backoff {
            BackoffSpec::Polynomial => quote!(#krate::Backoff::Polynomial),
            BackoffSpec::Exponential { base, max } => {
                let (base, max) = (duration(*base), duration(*max));
                quote!(#krate::Backoff::Exponential { base: #base, max: #max })
            }
            BackoffSpec::Linear { step, max } => {
                let (step, max) = (duration(*step), duration(*max));
                quote!(#krate::Backoff::Linear { step: #step, max: #max })
            }
            BackoffSpec::Constant(d) => {
                let d = duration(*d);
                quote!(#krate::Backoff::Constant(#d))
            }
            BackoffSpec::Custom(path) => quote_spanned!(path.span()=> #krate::Backoff::Custom(#path)),
        };
        calls.push(quote!(.backoff(#b)));
    }
    if let Some(unique) = &attr.unique {
        let by = match &unique.by {
            UniqueBySpec::Kind => quote!(#krate::UniqueBy::Kind),
            UniqueBySpec::Args => quote!(#krate::UniqueBy::Args),
            UniqueBySpec::Fields(fields) => {
                quote!(#krate::UniqueBy::Fields(::std::vec![#(::std::borrow::Cow::Borrowed(#fields)),*]))
            }
            UniqueBySpec::Key(key) => quote!(#krate::UniqueBy::Key(::std::borrow::Cow::Borrowed(#key))),
        };
        let mut u = quote!(#krate::UniqueOptions::new(#by));
        if let Some(period) = unique.period {
            let p = duration(period);
            u = quote!(#u.period(#p));
        }
        if let Some(states) = &unique.states {
            let variants = states.iter().map(|s| state_variant(s));
            u = quote!(#u.states([#(#krate::JobState::#variants),*]));
        }
        if unique.by_queue {
            u = quote!(#u.by_queue());
        }
        calls.push(quote!(.unique(#u)));
    }
    for tag in &attr.tags {
        calls.push(quote!(.tag(#tag)));
    }
    if let Some(n) = attr.limit {
        calls.push(quote!(.limit(#n)));
    }
    match &attr.partition_by {
        Some(PartitionSpec::Arg(path, _)) => {
            let path = path.join(".");
            calls.push(quote!(.partition_by(#krate::PartitionBy::Arg(::std::borrow::Cow::Borrowed(#path)))));
        }
        Some(PartitionSpec::Meta(name)) => {
            calls.push(quote!(.partition_by(#krate::PartitionBy::Meta(::std::borrow::Cow::Borrowed(#name)))));
        }
        None => {}
    }
    quote!(#krate::JobOptions::new() #(#calls)*)
}

/// For `partition_by = "a.b"`: a check that the arguments have that field, a compile error
/// at the attribute's string otherwise.
fn partition_field_check(attr: &JobAttr, args_ty: &TokenStream) -> TokenStream {
    let Some(PartitionSpec::Arg(path, span)) = &attr.partition_by else { return TokenStream::new() };
    let fields = path.iter().map(|f| match f.parse::<usize>() {
        Ok(i) => {
            syn::Member::Unnamed(syn::Index { index: u32::try_from(i).unwrap_or(u32::MAX), span: *span })
        }
        Err(_) => syn::Member::Named(proc_macro2::Ident::new(f, *span)),
    });
    quote_spanned!(*span=>
        const _: fn(&#args_ty) = |__args: &#args_ty| {
            let _ = &__args #(.#fields)*;
        };
    )
}

/// The whole expansion.
pub(crate) fn expand(attr: JobAttr, job: JobFn) -> TokenStream {
    let krate: Path = attr.krate.clone().unwrap_or_else(|| syn::parse_quote!(::jobs_core));
    let JobFn { item, ctx: (ctx_pat, ctx_ty), args, params, ret } = job;
    let vis = &item.vis;
    let name = &item.sig.ident;
    let name_str = name.to_string();
    // The default kind is the function's path: `concat!(module_path!(), "::name")`.
    let kind = match &attr.kind {
        Some(kind) => quote!(#kind),
        None => {
            let suffix = format!("::{}", name_str.trim_start_matches("r#"));
            quote!(::core::concat!(::core::module_path!(), #suffix))
        }
    };
    let kind_doc = attr.kind.clone().unwrap_or_else(|| format!("<module path>::{name_str}"));
    let (doc_attrs, other_attrs): (Vec<_>, Vec<_>) =
        item.attrs.iter().partition(|a| a.path().is_ident("doc"));
    let body = &item.block;
    let options = options(&krate, &attr);

    let args_ty = match &args {
        Some((_, ty)) => quote!(#ty),
        None => quote!(()),
    };
    // The handler's parameters as written, and the run's values for them in that order.
    let mut call_params = vec![quote!(#ctx_pat: #ctx_ty)];
    let mut call_args = vec![quote!(ctx)];
    let mut data_types = Vec::new();
    for (i, param) in params.iter().enumerate() {
        match (param, &args) {
            (Param::Args, Some((pat, ty))) => {
                call_params.push(quote!(#pat: #ty));
                call_args.push(quote!(args));
            }
            (Param::Args, None) => {}
            (Param::Data(data), _) => {
                let (pat, ty) = (&data.pat, &data.ty);
                let value = format_ident!("__data_{}", i);
                call_params.push(quote!(#pat: #ty));
                call_args.push(quote!(#value));
                data_types.push((value, ty.clone()));
            }
        }
    }
    let run_args_pat = if args.is_some() { quote!(args) } else { quote!(_args) };
    let sig_span = item.sig.span();
    let run_body = if data_types.is_empty() {
        quote_spanned!(ret.span()=> #name::call(#(#call_args),*))
    } else {
        // Each value through `FromAppData`, spanned on its parameter's type (a type that is
        // not `jobs_core::Data` is reported there); `ctx` and the values are the call
        // site's, as the run's parameters are.
        let app = format_ident!("__jobs_app_data");
        let (values, fetches): (Vec<_>, Vec<_>) = data_types
            .iter()
            .map(|(value, ty)| {
                (value.clone(), quote_spanned!(ty.span()=> <#ty as #krate::FromAppData>::from_app_data(#app)))
            })
            .unzip();
        quote! {
            async move {
                let #app = ctx.app_data();
                // The registry checks `needs()` before every run (and the worker when it
                // is built), so each value is there.
                let (#(::core::option::Option::Some(#values),)*) = (#(#fetches,)*) else {
                    ::core::panic!("{}", #krate::__private::missing_data(<Self as #krate::Job>::KIND, &<Self as #krate::Job>::needs()));
                };
                #name::call(#(#call_args),*).await
            }
        }
    };
    let needs: Vec<TokenStream> = data_types
        .iter()
        .map(|(_, ty)| quote_spanned!(ty.span()=> <#ty as #krate::FromAppData>::need()))
        .collect();
    let needs_fn = (!needs.is_empty()).then(|| {
        quote! {
            fn needs() -> ::std::vec::Vec<#krate::Need> {
                ::std::vec![#(#needs),*]
            }
        }
    });
    // Spanned on the return type, so that a handler not returning a `Result` is reported there.
    let ret_types = quote_spanned! {ret.span()=>
        type Output = <#ret as #krate::HandlerReturn>::Output;
        type Error = <#ret as #krate::HandlerReturn>::Error;
    };

    let descriptor = match &attr.cron {
        None => quote!(#krate::JobDescriptor::of::<#name>()),
        Some(cron) => {
            let (expression, timezone) = (&cron.expression, &cron.timezone);
            let missed = if cron.run_latest {
                quote!(#krate::MissedPolicy::RunLatest)
            } else {
                quote!(#krate::MissedPolicy::Skip)
            };
            quote!(#krate::JobDescriptor::of::<#name>().with_cron(#krate::CronAttribute {
                expression: #expression,
                timezone: #timezone,
                missed: #missed,
                args: __cron_args,
            }))
        }
    };
    let cron_args_fn = attr.cron.as_ref().map(|_| {
        quote_spanned! {sig_span=>
            fn __cron_args() -> ::core::result::Result<::std::string::String, #krate::__private::serde_json::Error> {
                #krate::__private::serde_json::to_string(&<#args_ty as ::core::default::Default>::default())
            }
        }
    });
    let partition_check = partition_field_check(&attr, &args_ty);
    let doc_summary = format!(
        "The `{kind_doc}` job. Enqueue it with [`{name_str}::enqueue`] (async connection or pool), \
         [`{name_str}::enqueue_sync`] (a sync diesel connection) or [`{name_str}::build`] to set per-call options."
    );

    quote! {
        #(#doc_attrs)*
        #[doc = ""]
        #[doc = #doc_summary]
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #name;

        impl #name {
            /// The kind name stored in the `kind` column.
            #vis const KIND: &'static str = #kind;

            /// Enqueues this job with the kind's defaults through an async connection
            /// (inside the caller's transaction, if any) or a pool.
            #vis fn enqueue<E: #krate::Enqueuer>(
                target: E,
                args: #args_ty,
            ) -> impl ::core::future::Future<Output = #krate::Result<#krate::Enqueued>> + ::core::marker::Send {
                #krate::EnqueueRequest::<#name>::new(args).enqueue(target)
            }

            /// Enqueues this job with the kind's defaults through a synchronous diesel
            /// connection of a supported backend (inside the caller's transaction, if any).
            #vis fn enqueue_sync<C>(conn: &mut C, args: #args_ty) -> #krate::Result<#krate::Enqueued>
            where
                C: #krate::__private::diesel::connection::LoadConnection,
                <C as #krate::__private::diesel::Connection>::Backend: #krate::JobsBackend,
            {
                #krate::EnqueueRequest::<#name>::new(args).enqueue_sync(conn)
            }

            /// A request to customise (queue, delay, priority, metadata, ...) before enqueueing.
            #vis fn build(args: #args_ty) -> #krate::EnqueueRequest<#name> {
                #krate::EnqueueRequest::new(args)
            }

            /// Calls the handler directly, without the queue (for tests).
            #(#other_attrs)*
            #vis async fn call(#(#call_params),*) -> #ret #body
        }

        impl #krate::Job for #name {
            const KIND: &'static str = #kind;
            type Args = #args_ty;
            #ret_types

            fn options() -> #krate::JobOptions {
                #options
            }

            #needs_fn

            #[allow(clippy::manual_async_fn)]
            fn run(
                ctx: #krate::JobContext,
                #run_args_pat: #args_ty,
            ) -> impl ::core::future::Future<Output = ::core::result::Result<Self::Output, Self::Error>>
                   + ::core::marker::Send {
                #run_body
            }
        }

        const _: () = {
            #cron_args_fn
            #krate::__private::inventory::submit! { #descriptor }
        };

        #partition_check
    }
}
