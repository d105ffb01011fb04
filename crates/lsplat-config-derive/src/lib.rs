//! `#[derive(Describe)]`: the configuration reference from the configuration types.
//!
//! On a struct (a configuration section) it lists every field under its serde name
//! with its doc comment, the range given by `#[config(range = "...")]` and the
//! description of its type (`<T as Describe>::describe()`, so a nested section or an
//! enum describes itself). On an enum of unit variants it lists the variants under
//! their serde names (`rename_all` and `rename` are honoured) with their doc comments.
//! A key added to a section therefore appears in `lsplat-engine config` and in
//! docs/config.md without further work.

use proc_macro::TokenStream;
use quote::quote;
use syn::{Attribute, Data, DeriveInput, Expr, Fields, Lit, Meta, parse_macro_input};

/// Derives `lsplat_core::config_doc::Describe`.
#[proc_macro_derive(Describe, attributes(config))]
pub fn derive_describe(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let doc = docs(&input.attrs);
    let rename_all = serde_value(&input.attrs, "rename_all")?;
    let body = match &input.data {
        Data::Struct(s) => {
            let Fields::Named(fields) = &s.fields else {
                return Err(syn::Error::new_spanned(
                    name,
                    "Describe needs a struct with named fields",
                ));
            };
            let mut items = Vec::new();
            for f in &fields.named {
                if serde_flag(&f.attrs, "skip")? {
                    continue;
                }
                let ident = f.ident.as_ref().expect("named field");
                let key = match serde_value(&f.attrs, "rename")? {
                    Some(r) => r,
                    None => rename(&ident.to_string(), rename_all.as_deref()),
                };
                let fdoc = docs(&f.attrs);
                let range = match config_range(&f.attrs)? {
                    Some(r) => quote!(Some(#r.to_string())),
                    None => quote!(None),
                };
                let ty = &f.ty;
                items.push(quote! {
                    ::lsplat_core::config_doc::Field {
                        key: #key,
                        doc: #fdoc.to_string(),
                        range: #range,
                        ty: <#ty as ::lsplat_core::config_doc::Describe>::describe(),
                    }
                });
            }
            quote!(::lsplat_core::config_doc::TypeDoc::Section {
                doc: #doc.to_string(),
                fields: vec![#(#items),*],
            })
        }
        Data::Enum(e) => {
            let mut items = Vec::new();
            for v in &e.variants {
                if !matches!(v.fields, Fields::Unit) {
                    return Err(syn::Error::new_spanned(
                        v,
                        "Describe supports enums of unit variants only",
                    ));
                }
                if serde_flag(&v.attrs, "skip")? {
                    continue;
                }
                let key = match serde_value(&v.attrs, "rename")? {
                    Some(r) => r,
                    None => rename(&v.ident.to_string(), rename_all.as_deref()),
                };
                let vdoc = docs(&v.attrs);
                items.push(quote!((#key, #vdoc.to_string())));
            }
            quote!(::lsplat_core::config_doc::TypeDoc::Choice(
                vec![#(#items),*]
            ))
        }
        Data::Union(_) => {
            return Err(syn::Error::new_spanned(
                name,
                "Describe does not support unions",
            ));
        }
    };
    let (imp, ty, wh) = input.generics.split_for_impl();
    Ok(quote! {
        impl #imp ::lsplat_core::config_doc::Describe for #name #ty #wh {
            fn describe() -> ::lsplat_core::config_doc::TypeDoc {
                #body
            }
        }
    })
}

/// The doc comment: `///` lines joined, a blank line kept as a paragraph break.
fn docs(attrs: &[Attribute]) -> String {
    let mut lines = Vec::new();
    for a in attrs {
        if let Meta::NameValue(nv) = &a.meta
            && nv.path.is_ident("doc")
            && let Expr::Lit(l) = &nv.value
            && let Lit::Str(s) = &l.lit
        {
            lines.push(s.value().trim().to_string());
        }
    }
    let mut out = String::new();
    for l in lines {
        if l.is_empty() {
            out.push_str("\n\n");
        } else {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push(' ');
            }
            out.push_str(&l);
        }
    }
    out.trim().to_string()
}

/// `#[serde(key = "value")]`.
fn serde_value(attrs: &[Attribute], key: &str) -> syn::Result<Option<String>> {
    let mut found = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        a.parse_nested_meta(|m| {
            if m.path.is_ident(key) {
                let s: syn::LitStr = m.value()?.parse()?;
                found = Some(s.value());
            } else if m.input.peek(syn::Token![=]) {
                // Another `key = value`: skip its value.
                let _: Expr = m.value()?.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(found)
}

/// `#[serde(flag)]`.
fn serde_flag(attrs: &[Attribute], flag: &str) -> syn::Result<bool> {
    let mut found = false;
    for a in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        a.parse_nested_meta(|m| {
            if m.path.is_ident(flag) {
                found = true;
            } else if m.input.peek(syn::Token![=]) {
                let _: Expr = m.value()?.parse()?;
            }
            Ok(())
        })?;
    }
    Ok(found)
}

/// `#[config(range = "...")]`.
fn config_range(attrs: &[Attribute]) -> syn::Result<Option<String>> {
    let mut found = None;
    for a in attrs.iter().filter(|a| a.path().is_ident("config")) {
        a.parse_nested_meta(|m| {
            if m.path.is_ident("range") {
                let s: syn::LitStr = m.value()?.parse()?;
                found = Some(s.value());
                Ok(())
            } else {
                Err(m.error("expected `range = \"...\"`"))
            }
        })?;
    }
    Ok(found)
}

/// A Rust name as serde's `rename_all` spells it.
fn rename(ident: &str, rule: Option<&str>) -> String {
    let snake = || {
        let mut s = String::new();
        for (i, c) in ident.chars().enumerate() {
            if c.is_uppercase() {
                if i > 0 {
                    s.push('_');
                }
                s.extend(c.to_lowercase());
            } else {
                s.push(c);
            }
        }
        s
    };
    match rule {
        Some("lowercase") => ident.to_lowercase(),
        Some("UPPERCASE") => ident.to_uppercase(),
        Some("snake_case") => snake(),
        Some("kebab-case") => snake().replace('_', "-"),
        Some("SCREAMING_SNAKE_CASE") => snake().to_uppercase(),
        _ => ident.to_string(),
    }
}
