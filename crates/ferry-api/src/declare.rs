//! Options declared once: [`declare_options!`](crate::declare_options) turns one list of
//! fields (name in job files, type, default or `required` / `optional`, description from the
//! doc comment) into a typed struct, the [`OptionSpec`] list that `ferry connectors NAME`
//! prints and that rejects unknown options, and the code that reads them with errors naming
//! file, line and option. A default is written once, so what `ferry connectors` shows and
//! what the plugin uses cannot disagree.
//!
//! ```
//! ferry_api::declare_options! {
//!     /// The options of a sink that prints rows.
//!     pub struct PrintOptions => PRINT_OPTIONS {
//!         /// Whether rows are printed at all.
//!         print: bool = "log.print.data", default true;
//!         /// Pause after each row, in milliseconds.
//!         delay_ms: u64 = "log.print.delay.ms", default 0;
//!         /// Where to print (stdout when unset).
//!         target: String = "target", optional;
//!     }
//! }
//!
//! let mut o = ferry_api::Options::from_json("Print", serde_json::json!({"log.print.delay.ms": 5}));
//! let p = PrintOptions::read(&mut o).unwrap();
//! o.finish(PRINT_OPTIONS).unwrap();
//! assert_eq!((p.print, p.delay_ms, p.target), (true, 5, None));
//! assert_eq!(PRINT_OPTIONS[1].default, Some("0"));
//! ```

use serde_json::{Map, Value};

use crate::error::Result;
use crate::options::{OptionKind, Options};

/// A type an option can have, read through [`Options`]'s typed getters.
pub trait OptionValue: Sized {
    /// Its kind, for `ferry connectors`.
    const KIND: OptionKind;
    /// The value of `key`, `None` when unset; an error names the option and what was found.
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>>;
}

impl OptionValue for bool {
    const KIND: OptionKind = OptionKind::Bool;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.bool(key)
    }
}

impl OptionValue for i64 {
    const KIND: OptionKind = OptionKind::Int;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.i64(key)
    }
}

impl OptionValue for u64 {
    const KIND: OptionKind = OptionKind::Int;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.u64(key)
    }
}

impl OptionValue for f64 {
    const KIND: OptionKind = OptionKind::Float;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.f64(key)
    }
}

impl OptionValue for String {
    const KIND: OptionKind = OptionKind::String;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.string(key)
    }
}

impl OptionValue for Vec<String> {
    const KIND: OptionKind = OptionKind::List;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.string_list(key)
    }
}

impl OptionValue for Map<String, Value> {
    const KIND: OptionKind = OptionKind::Object;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.object(key)
    }
}

impl OptionValue for Value {
    const KIND: OptionKind = OptionKind::Any;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        Ok(o.get(key).filter(|v| !v.is_null()))
    }
}

/// Declares a plugin's options once; see the [module documentation](crate::declare).
///
/// Each field is `name: Type = "key.in.job.files", MODE;` with a doc comment that becomes
/// the option's description, and MODE one of `default EXPR` (the field has type `Type`),
/// `required` (type `Type`; unset is an error) or `optional` (type `Option<Type>`). Types
/// are those with an [`OptionValue`](crate::declare::OptionValue) impl. The macro defines the
/// struct, `const SPECS: &[OptionSpec]` under the given name, and `Struct::read(&mut
/// Options)`, which reads every field; call `Options::finish(SPECS)` after reading any
/// options the struct does not hold.
#[macro_export]
macro_rules! declare_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident => $specs:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $key:literal, $mode:ident $($default:expr)? ;
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone)]
        $vis struct $name {
            $(
                $(#[doc = $doc])*
                pub $field: $crate::declare_options!(@type $mode $ty),
            )*
        }

        /// Every option of
        #[doc = concat!("[`", stringify!($name), "`]")]
        /// as `ferry connectors` lists them.
        $vis const $specs: &[$crate::OptionSpec] = &[
            $(
                $crate::OptionSpec {
                    name: $key,
                    kind: <$ty as $crate::declare::OptionValue>::KIND,
                    required: $crate::declare_options!(@required $mode),
                    default: $crate::declare_options!(@default $mode $($default)?),
                    description: $crate::declare::trim_doc(concat!($($doc, "\n",)* "")),
                },
            )*
        ];

        impl $name {
            /// Reads every option of the struct from `o`.
            #[allow(clippy::redundant_closure_call)]
            pub fn read(o: &mut $crate::Options) -> $crate::Result<Self> {
                Ok($name {
                    $(
                        $field: $crate::declare_options!(@read o $key $ty, $mode $($default)?),
                    )*
                })
            }
        }
    };
    (@type optional $ty:ty) => { Option<$ty> };
    (@type $mode:ident $ty:ty) => { $ty };
    (@required required) => { true };
    (@required $mode:ident) => { false };
    (@default default $default:expr) => { Some(stringify!($default)) };
    (@default $mode:ident) => { None };
    (@read $o:ident $key:literal $ty:ty, default $default:expr) => {
        match <$ty as $crate::declare::OptionValue>::read($o, $key)? {
            Some(v) => v,
            None => $crate::declare::default_of::<$ty, _>($default),
        }
    };
    (@read $o:ident $key:literal $ty:ty, required) => {
        match <$ty as $crate::declare::OptionValue>::read($o, $key)? {
            Some(v) => v,
            None => return Err($o.error($key, "is required but not set")),
        }
    };
    (@read $o:ident $key:literal $ty:ty, optional) => {
        <$ty as $crate::declare::OptionValue>::read($o, $key)?
    };
}

/// A default as a declaration writes it (`5`, `true`, `"json"`), as a value of the
/// option's type: one impl per type, so that integer literals take the option's type.
pub trait DefaultValue<T> {
    /// The value.
    fn into_value(self) -> T;
}

macro_rules! same_type_default {
    ($($t:ty),*) => {$(
        impl DefaultValue<$t> for $t {
            fn into_value(self) -> $t {
                self
            }
        }
    )*};
}
same_type_default!(bool, i64, u64, f64, Value);

impl DefaultValue<String> for &str {
    fn into_value(self) -> String {
        self.to_string()
    }
}

impl DefaultValue<Vec<String>> for &[&str] {
    fn into_value(self) -> Vec<String> {
        self.iter().map(|s| s.to_string()).collect()
    }
}

/// `default` as a value of `T` (used by [`declare_options!`](crate::declare_options)).
pub fn default_of<T, D: DefaultValue<T>>(default: D) -> T {
    default.into_value()
}

/// A doc comment as one description: the lines joined by spaces, without the space each
/// `///` line starts with. `const` so that option lists stay `const`.
pub const fn trim_doc(doc: &'static str) -> &'static str {
    // Only the leading space of the first line and the trailing newline are removed here:
    // const code cannot build a new string, and `ferry connectors` folds the other line
    // breaks when it prints.
    let b = doc.as_bytes();
    let mut start = 0;
    while start < b.len() && b[start] == b' ' {
        start += 1;
    }
    let mut end = b.len();
    while end > start && (b[end - 1] == b'\n' || b[end - 1] == b' ') {
        end -= 1;
    }
    let (_, rest) = b.split_at(start);
    let (mid, _) = rest.split_at(end - start);
    match std::str::from_utf8(mid) {
        Ok(s) => s,
        Err(_) => doc,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Options;

    crate::declare_options! {
        /// Test options.
        struct Demo => DEMO {
            /// Rows to make.
            /// At most a million.
            rows: u64 = "row.num", default 5;
            /// The path.
            path: String = "path", required;
            /// A name.
            name: String = "name", optional;
            /// A label.
            label: String = "label", default "none";
        }
    }

    #[test]
    fn one_declaration_gives_the_struct_the_specs_and_their_defaults() {
        let mut o = Options::from_json("Demo", json!({"path": "/x", "row.num": "7"}));
        let d = Demo::read(&mut o).unwrap();
        o.finish(DEMO).unwrap();
        assert_eq!(
            (d.rows, d.path.as_str(), d.name, d.label.as_str()),
            (7, "/x", None, "none")
        );
        assert_eq!(DEMO[0].name, "row.num");
        assert_eq!(DEMO[0].default, Some("5"));
        assert_eq!(DEMO[0].description, "Rows to make.\n At most a million.");
        assert!(DEMO[1].required && !DEMO[2].required);
        assert_eq!(DEMO[3].default, Some("\"none\""));

        let mut o = Options::from_json("Demo", json!({}));
        let e = Demo::read(&mut o).unwrap_err().to_string();
        assert!(e.contains("option 'path': is required but not set"), "{e}");
        let mut o = Options::from_json("Demo", json!({"path": "/x", "row.num": "many"}));
        let e = Demo::read(&mut o).unwrap_err().to_string();
        assert!(e.contains("option 'row.num'"), "{e}");
    }
}
