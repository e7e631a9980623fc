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
use crate::options::{OptionKind, OptionSpec, Options};

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

impl OptionValue for Vec<Value> {
    const KIND: OptionKind = OptionKind::List;
    fn read(o: &mut Options, key: &str) -> Result<Option<Self>> {
        o.list(key)
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
///
/// More, after the key and after the mode:
///
/// - **Aliases**: `"field_delimiter" | "delimiter"`: the first key that is set is read
///   (errors name that key); every alias is listed as an option of its own, "Old spelling
///   of field_delimiter.", with its type's kind (a `one_of` shows on the first key only:
///   a declarative macro cannot repeat the checks once per alias).
/// - `, one_of VALUES` (a `&[&str]`, field type `String`): the value must be one of them,
///   case-insensitively, and is read as the listed spelling; the kind is
///   `OptionKind::Enum(VALUES)`, and a wrong value is an error listing the valid ones.
/// - `, values VALUES`: the kind is `OptionKind::Enum(VALUES)` as with `one_of`, but the
///   value is not checked here: for a plugin whose errors for a wrong value say more than
///   the list of valid ones (why a value SeaTunnel knows is not supported).
/// - `, min EXPR` / `, max EXPR`: bounds, checked in the order written: "must be at least
///   1", "70000 is too large (at most 65535)". Defaults are not checked.
/// - `, shows "TEXT"`: what `ferry connectors` shows as the default instead of the
///   declared one, for a default that depends on other options (`optional, shows "\\u0001
///   (text), , (csv)"`) or one whose literal reads badly.
///
/// ```
/// ferry_api::declare_options! {
///     pub struct Demo => DEMO {
///         /// Field separator.
///         delimiter: String = "field_delimiter" | "delimiter", default ",";
///         /// Compression.
///         codec: String = "compress_codec", default "none", one_of &["none", "lzo"];
///         /// Splits.
///         splits: u64 = "split.num", default 1, max 1000, min 1;
///     }
/// }
/// let mut o = ferry_api::Options::from_json("Demo", serde_json::json!({"delimiter": ";", "compress_codec": "LZO"}));
/// let d = Demo::read(&mut o).unwrap();
/// assert_eq!((d.delimiter.as_str(), d.codec.as_str(), d.splits), (";", "lzo", 1));
/// assert_eq!(DEMO[1].name, "delimiter");
/// assert!(matches!(DEMO[2].kind, ferry_api::OptionKind::Enum(_)));
/// let mut o = ferry_api::Options::from_json("Demo", serde_json::json!({"split.num": 0}));
/// assert!(Demo::read(&mut o).unwrap_err().to_string().ends_with("option 'split.num': must be at least 1"));
/// ```
///
/// Options read dynamically (`*.fake.mode`, one per type) stay hand-written
/// [`OptionSpec`](crate::OptionSpec)s, joined to a generated list with
/// [`concat_specs!`](crate::concat_specs).
#[macro_export]
macro_rules! declare_options {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident => $specs:ident {
            $(
                $(#[doc = $doc:literal])*
                $field:ident : $ty:ty = $key:literal $(| $alias:literal)*,
                    $mode:ident $($default:expr)? $(, $check:ident $arg:expr)* ;
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
                    kind: $crate::declare::kind(
                        <$ty as $crate::declare::OptionValue>::KIND,
                        &[$($crate::declare_options!(@enum $check $arg)),*],
                    ),
                    required: $crate::declare_options!(@required $mode),
                    default: $crate::declare::shown(
                        $crate::declare_options!(@default $mode $($default)?),
                        &[$($crate::declare_options!(@shows $check $arg)),*],
                    ),
                    description: $crate::declare::trim_doc(concat!($($doc, "\n",)* "")),
                },
                $(
                    $crate::OptionSpec {
                        name: $alias,
                        kind: <$ty as $crate::declare::OptionValue>::KIND,
                        required: false,
                        default: None,
                        description: concat!("Old spelling of ", $key, "."),
                    },
                )*
            )*
        ];

        impl $name {
            /// Reads every option of the struct from `o`.
            #[allow(clippy::redundant_closure_call)]
            pub fn read(o: &mut $crate::Options) -> $crate::Result<Self> {
                Ok($name {
                    $(
                        $field: {
                            let key = $crate::declare::first_set(o, &[$key $(, $alias)*]);
                            let raw = match <$ty as $crate::declare::OptionValue>::read(o, key)? {
                                Some(v) => {
                                    $(let v = $crate::declare_options!(@check o key v, $check $arg);)*
                                    Some(v)
                                }
                                None => None,
                            };
                            $crate::declare_options!(@mode o key raw $ty, $mode $($default)?)
                        },
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
    (@enum one_of $arg:expr) => { Some($arg) };
    (@enum values $arg:expr) => { Some($arg) };
    (@enum $check:ident $arg:expr) => { None };
    (@shows shows $arg:expr) => { Some($arg) };
    (@shows $check:ident $arg:expr) => { None };
    (@check $o:ident $k:ident $v:ident, min $arg:expr) => {
        $crate::declare::check_min($o, $k, $v, $arg)?
    };
    (@check $o:ident $k:ident $v:ident, max $arg:expr) => {
        $crate::declare::check_max($o, $k, $v, $arg)?
    };
    (@check $o:ident $k:ident $v:ident, one_of $arg:expr) => {
        $crate::declare::check_one_of($o, $k, $v, $arg)?
    };
    (@check $o:ident $k:ident $v:ident, shows $arg:expr) => { $v };
    (@check $o:ident $k:ident $v:ident, values $arg:expr) => { $v };
    (@mode $o:ident $k:ident $raw:ident $ty:ty, default $default:expr) => {
        match $raw {
            Some(v) => v,
            None => $crate::declare::default_of::<$ty, _>($default),
        }
    };
    (@mode $o:ident $k:ident $raw:ident $ty:ty, required) => {
        match $raw {
            Some(v) => v,
            None => return Err($o.error($k, "is required but not set")),
        }
    };
    (@mode $o:ident $k:ident $raw:ident $ty:ty, optional) => { $raw };
}

/// Joins option lists into one `&'static [OptionSpec]`, in order: a generated list and
/// hand-written entries, or the options of one table and those around them.
///
/// ```
/// use ferry_api::{OptionKind, OptionSpec};
/// const A: &[OptionSpec] = &[OptionSpec::optional("a", OptionKind::Int, None, "a")];
/// const B: &[OptionSpec] = &[OptionSpec::optional("b", OptionKind::Int, None, "b")];
/// const AB: &[OptionSpec] = ferry_api::concat_specs!(A, B);
/// assert_eq!(AB.iter().map(|s| s.name).collect::<Vec<_>>(), ["a", "b"]);
/// ```
#[macro_export]
macro_rules! concat_specs {
    ($($part:expr),+ $(,)?) => {{
        const PARTS: &[&[$crate::OptionSpec]] = &[$($part),+];
        const ALL: [$crate::OptionSpec; $crate::declare::total_len(PARTS)] =
            $crate::declare::concat(PARTS);
        &ALL
    }};
}

/// The number of options in `parts` (used by [`concat_specs!`](crate::concat_specs)).
pub const fn total_len(parts: &[&[OptionSpec]]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// `parts` joined (used by [`concat_specs!`](crate::concat_specs)).
pub const fn concat<const N: usize>(parts: &[&[OptionSpec]]) -> [OptionSpec; N] {
    let mut out = [OptionSpec::optional("", OptionKind::Any, None, ""); N];
    let mut k = 0;
    let mut i = 0;
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[k] = parts[i][j];
            k += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(k == N, "concat_specs: wrong length");
    out
}

/// The kind of an option: `Enum` when a `one_of` gives its values, else its type's.
pub const fn kind(base: OptionKind, one_of: &[Option<&'static [&'static str]>]) -> OptionKind {
    let mut i = 0;
    while i < one_of.len() {
        if let Some(values) = one_of[i] {
            return OptionKind::Enum(values);
        }
        i += 1;
    }
    base
}

/// The default `ferry connectors` shows: a `shows` text, else the declared default.
pub const fn shown(
    declared: Option<&'static str>,
    shows: &[Option<&'static str>],
) -> Option<&'static str> {
    let mut i = 0;
    while i < shows.len() {
        if shows[i].is_some() {
            return shows[i];
        }
        i += 1;
    }
    declared
}

/// The default of option `key` in `specs` as text, without the quotes of a string
/// literal (`yyyy-MM-dd`), as `ferry connectors` shows it.
pub fn default_text(specs: &[OptionSpec], key: &str) -> Option<&'static str> {
    specs
        .iter()
        .find(|s| s.name == key)
        .and_then(|s| s.default)
        .map(|d| {
            d.strip_prefix('"')
                .and_then(|d| d.strip_suffix('"'))
                .unwrap_or(d)
        })
}

/// Checks an option list as `ferry connectors` prints it, for plugins' tests: no name
/// twice, and every default a value of its option's kind (a whole number for `Int`, one
/// of the values for `Enum`, …), except the options in `described`, whose shown default
/// is a description (`text and json: true; csv: false`) because it depends on others.
pub fn check_specs(specs: &[OptionSpec], described: &[&str]) -> std::result::Result<(), String> {
    let mut names = std::collections::BTreeSet::new();
    for s in specs {
        if !names.insert(s.name) {
            return Err(format!("option '{}' is listed twice", s.name));
        }
        if s.required && s.default.is_some() {
            return Err(format!("option '{}' is required and has a default", s.name));
        }
        let Some(d) = default_text(std::slice::from_ref(s), s.name) else {
            continue;
        };
        if described.contains(&s.name) {
            continue;
        }
        let ok = match s.kind {
            OptionKind::Int => d.parse::<i64>().is_ok(),
            OptionKind::Float => d.parse::<f64>().is_ok_and(f64::is_finite),
            OptionKind::Bool => d == "true" || d == "false",
            OptionKind::Enum(values) => values.contains(&d),
            OptionKind::String | OptionKind::List | OptionKind::Object | OptionKind::Any => true,
        };
        if !ok {
            return Err(format!(
                "the default of option '{}' ({d}) is not a value of its kind ({})",
                s.name,
                s.kind.describe()
            ));
        }
    }
    Ok(())
}

/// The first of `keys` that is set, else the first (an option and its old spellings).
pub fn first_set(o: &Options, keys: &[&'static str]) -> &'static str {
    keys.iter()
        .copied()
        .find(|k| o.contains(k))
        .unwrap_or(keys[0])
}

/// `v` if it is at least `min`, else an error naming the option.
pub fn check_min<T: PartialOrd + std::fmt::Display>(
    o: &Options,
    key: &str,
    v: T,
    min: T,
) -> Result<T> {
    if v < min {
        return Err(o.error(key, format!("must be at least {min}")));
    }
    Ok(v)
}

/// `v` if it is at most `max`, else an error naming the option.
pub fn check_max<T: PartialOrd + std::fmt::Display>(
    o: &Options,
    key: &str,
    v: T,
    max: T,
) -> Result<T> {
    if v > max {
        return Err(o.error(key, format!("{v} is too large (at most {max})")));
    }
    Ok(v)
}

/// `v` as the spelling in `allowed` it matches case-insensitively, else the error
/// [`Options::enum_value`] gives (listing the valid values).
pub fn check_one_of(o: &Options, key: &str, v: String, allowed: &[&'static str]) -> Result<String> {
    o.check_enum(key, &v, allowed).map(str::to_string)
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

    crate::declare_options! {
        /// Test options with the extensions.
        struct Ext => EXT {
            /// Separator.
            delimiter: String = "field_delimiter" | "delimiter", default ",";
            /// Codec.
            codec: String = "compress_codec", default "none", one_of &["none", "lzo"];
            /// Splits.
            splits: u64 = "split.num", default 1, max 10, min 1;
            /// Rows.
            rows: u64 = "rows", optional, shows "all";
        }
    }

    crate::declare_options! {
        /// A required option with an old spelling.
        struct Url => URL {
            /// Where.
            url: String = "base-url" | "url", required;
        }
    }

    #[test]
    fn a_required_option_is_set_by_its_old_spelling() {
        assert!(URL[1].is_alias_of("base-url") && !URL[0].is_alias_of("base-url"));
        let mut o = Options::from_json("Url", json!({"url": "jdbc:x"}));
        assert_eq!(Url::read(&mut o).unwrap().url, "jdbc:x");
        o.finish(URL).unwrap();
        let mut o = Options::from_json("Url", json!({}));
        assert!(Url::read(&mut o).is_err());
        assert!(o
            .finish(URL)
            .unwrap_err()
            .to_string()
            .contains("'base-url'"));
    }

    #[test]
    fn aliases_enums_bounds_and_shown_defaults() {
        let names: Vec<&str> = EXT.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "field_delimiter",
                "delimiter",
                "compress_codec",
                "split.num",
                "rows"
            ]
        );
        assert_eq!(EXT[1].description, "Old spelling of field_delimiter.");
        assert_eq!(EXT[2].kind, crate::OptionKind::Enum(&["none", "lzo"]));
        assert_eq!(EXT[4].default, Some("all"));
        assert_eq!(super::default_text(EXT, "field_delimiter"), Some(","));
        super::check_specs(EXT, &["rows"]).unwrap();
        assert!(super::check_specs(EXT, &[]).is_err());

        let mut o = Options::from_json("Ext", json!({"delimiter": ";", "compress_codec": "LZO"}));
        let e = Ext::read(&mut o).unwrap();
        o.finish(EXT).unwrap();
        assert_eq!(
            (e.delimiter.as_str(), e.codec.as_str(), e.splits, e.rows),
            (";", "lzo", 1, None)
        );
        // The new spelling wins over the old.
        let mut o = Options::from_json("Ext", json!({"delimiter": ";", "field_delimiter": "|"}));
        assert_eq!(Ext::read(&mut o).unwrap().delimiter, "|");

        let err = |v: serde_json::Value| {
            Ext::read(&mut Options::from_json("Ext", v))
                .unwrap_err()
                .to_string()
        };
        assert!(err(json!({"compress_codec": "zip"}))
            .ends_with("option 'compress_codec': invalid value 'zip' (valid values: none, lzo)"));
        assert!(err(json!({"split.num": 0})).ends_with("option 'split.num': must be at least 1"));
        assert!(err(json!({"split.num": 11}))
            .ends_with("option 'split.num': 11 is too large (at most 10)"));
        assert!(err(json!({"delimiter": [1]})).contains("option 'delimiter'"));
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
