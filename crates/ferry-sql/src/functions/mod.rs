//! SeaTunnel's SQL functions as DataFusion scalar UDFs.
//!
//! Every function is a [`SeaFn`]: a name, the kinds of its arguments (which drive
//! DataFusion's type coercion, so a kernel always sees the Arrow types it expects), a
//! return type and a kernel that works over whole Arrow arrays. Constant arguments
//! (a pattern, a format) stay length-1 arrays and are read at index 0, so they are never
//! expanded to the batch length.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, FieldRef, TimeUnit};
use datafusion::common::{plan_err, Result as DFResult, ScalarValue};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    TypeSignature, Volatility,
};

pub(crate) mod arith;
pub(crate) mod cast;
pub(crate) mod datetime;
pub(crate) mod des;
// Java date-time patterns live in ferry-api, shared with the file connectors.
pub(crate) use ferry_api::javatime as javafmt;
pub(crate) mod javatext;
pub(crate) mod numeric;
pub(crate) mod string;

#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests_datetime;
#[cfg(test)]
mod tests_numeric;
#[cfg(test)]
mod tests_string;
#[cfg(test)]
mod tests_system;

/// How an argument is coerced before the kernel sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Arg {
    /// Text (`Utf8`); any other type is turned into its text as Java's `toString` writes
    /// it (`1.0E10`, `2024-01-02T10:15`).
    Str,
    /// A whole number (`Int64`); any number is accepted.
    Int,
    /// A floating-point number (`Float64`); any number is accepted.
    Float,
    /// A number of any type, kept as it is.
    Num,
    /// A date, time or timestamp (microseconds), kept as it is.
    Temporal,
    /// Text, or bytes kept as bytes.
    StrOrBytes,
    /// Any type, kept as it is (text views become `Utf8`).
    Any,
}

/// The arguments a kernel works on: arrays of the batch length, or of length 1 for
/// constants.
pub(crate) struct Args {
    cols: Vec<(ArrayRef, bool)>,
    /// Rows to produce.
    pub rows: usize,
}

/// One argument column; a constant is read at index 0 for every row.
pub(crate) struct Col<'a, A> {
    arr: &'a A,
    scalar: bool,
}

impl<A: Array> Col<'_, A> {
    #[inline]
    fn idx(&self, i: usize) -> usize {
        if self.scalar {
            0
        } else {
            i
        }
    }
}

impl<'a> Col<'a, arrow::array::StringArray> {
    /// Text of row `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a str> {
        let j = self.idx(i);
        if self.arr.is_null(j) {
            None
        } else {
            Some(self.arr.value(j))
        }
    }
}

impl<'a> Col<'a, arrow::array::BinaryArray> {
    /// Bytes of row `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let j = self.idx(i);
        if self.arr.is_null(j) {
            None
        } else {
            Some(self.arr.value(j))
        }
    }
}

impl<T: ArrowPrimitiveType> Col<'_, PrimitiveArray<T>> {
    /// Value of row `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<T::Native> {
        let j = self.idx(i);
        if self.arr.is_null(j) {
            None
        } else {
            Some(self.arr.value(j))
        }
    }
}

impl Args {
    /// Number of arguments.
    pub fn len(&self) -> usize {
        self.cols.len()
    }
    /// The type of argument `k`.
    pub fn data_type(&self, k: usize) -> &DataType {
        self.cols[k].0.data_type()
    }
    /// Argument `k` as it is.
    pub fn array(&self, k: usize) -> &ArrayRef {
        &self.cols[k].0
    }
    /// Whether argument `k` is a constant.
    pub fn is_scalar(&self, k: usize) -> bool {
        self.cols[k].1
    }
    /// Argument `k` as text.
    pub fn str(&self, k: usize) -> DFResult<Col<'_, arrow::array::StringArray>> {
        let (a, s) = &self.cols[k];
        let arr = a
            .as_any()
            .downcast_ref::<arrow::array::StringArray>()
            .ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "argument {} is {}, not text",
                    k + 1,
                    a.data_type()
                ))
            })?;
        Ok(Col { arr, scalar: *s })
    }
    /// Argument `k` as bytes.
    pub fn bytes(&self, k: usize) -> DFResult<Col<'_, arrow::array::BinaryArray>> {
        let (a, s) = &self.cols[k];
        let arr = a
            .as_any()
            .downcast_ref::<arrow::array::BinaryArray>()
            .ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "argument {} is {}, not bytes",
                    k + 1,
                    a.data_type()
                ))
            })?;
        Ok(Col { arr, scalar: *s })
    }
    /// Argument `k` as a primitive array of type `T`.
    pub fn prim<T: ArrowPrimitiveType>(&self, k: usize) -> DFResult<Col<'_, PrimitiveArray<T>>> {
        let (a, s) = &self.cols[k];
        let arr = a.as_primitive_opt::<T>().ok_or_else(|| {
            DataFusionError::Internal(format!(
                "argument {} has unexpected type {}",
                k + 1,
                a.data_type()
            ))
        })?;
        Ok(Col { arr, scalar: *s })
    }
    /// Argument `k` as a whole number, or `None` when absent or null in row `i`.
    pub fn opt_i64(&self, k: usize, i: usize) -> DFResult<Option<i64>> {
        if k >= self.len() {
            return Ok(None);
        }
        Ok(self.prim::<arrow::datatypes::Int64Type>(k)?.get(i))
    }
}

/// Computes a function over [`Args`]; returns an array of `args.rows` rows.
pub(crate) type Kernel = fn(&Args, &DataType) -> DFResult<ArrayRef>;
/// The return type, from the (coerced) argument types and the constant arguments.
pub(crate) type RetType = fn(&[DataType], &[Option<&ScalarValue>]) -> DFResult<DataType>;

/// A SeaTunnel function as a DataFusion UDF.
#[derive(Debug)]
pub(crate) struct SeaFn {
    name: &'static str,
    aliases: Vec<String>,
    signature: Signature,
    args: &'static [Arg],
    min_args: usize,
    variadic: bool,
    ret: RetType,
    kernel: Kernel,
    volatile: bool,
}

// Two SeaFns are the same function when they have the same name (the registry key).
impl PartialEq for SeaFn {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for SeaFn {}
impl Hash for SeaFn {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl SeaFn {
    /// A function `name` taking `args` (the first `min_args` required).
    pub(crate) fn new(
        name: &'static str,
        args: &'static [Arg],
        min_args: usize,
        ret: RetType,
        kernel: Kernel,
    ) -> Self {
        let volatility = Volatility::Immutable;
        let signature = if min_args == 0 {
            Signature::one_of(
                vec![TypeSignature::Nullary, TypeSignature::UserDefined],
                volatility,
            )
        } else {
            Signature::user_defined(volatility)
        };
        SeaFn {
            name,
            aliases: vec![],
            signature,
            args,
            min_args,
            variadic: false,
            ret,
            kernel,
            volatile: false,
        }
    }
    /// Other names for the function.
    pub(crate) fn alias(mut self, names: &[&str]) -> Self {
        self.aliases.extend(names.iter().map(|s| s.to_string()));
        self
    }
    /// The last argument kind repeats any number of times.
    pub(crate) fn variadic(mut self) -> Self {
        self.variadic = true;
        self
    }
    /// Gives a new value on every call (rows differ even for constant arguments).
    pub(crate) fn volatile(mut self) -> Self {
        self.volatile = true;
        let sig = if self.min_args == 0 {
            Signature::one_of(
                vec![TypeSignature::Nullary, TypeSignature::UserDefined],
                Volatility::Volatile,
            )
        } else {
            Signature::user_defined(Volatility::Volatile)
        };
        self.signature = sig;
        self
    }
    /// The kind of argument `k` (the last kind repeats).
    fn kind(&self, k: usize) -> Arg {
        self.args
            .get(k)
            .or(self.args.last())
            .copied()
            .unwrap_or(Arg::Any)
    }
    fn max_args(&self) -> Option<usize> {
        if self.variadic {
            None
        } else {
            Some(self.args.len())
        }
    }
}

fn is_number(t: &DataType) -> bool {
    t.is_numeric() || matches!(t, DataType::Null)
}

fn coerce_one(fname: &str, k: usize, kind: Arg, t: &DataType) -> DFResult<DataType> {
    let bad = |what: &str| -> DFResult<DataType> {
        plan_err!(
            "argument {} of function {}() must be {what}, found {}",
            k + 1,
            fname.to_uppercase(),
            ferry_api::types::type_name(t)
        )
    };
    Ok(match kind {
        // Numbers and date-times whose Java text differs from Arrow's arrive as they are
        // and are written as text by `javatext` when the function runs.
        Arg::Str => javatext::text_source_type(t).unwrap_or(DataType::Utf8),
        Arg::Int => {
            if is_number(t)
                || matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
            {
                DataType::Int64
            } else {
                return bad("a whole number");
            }
        }
        Arg::Float => {
            if is_number(t) {
                DataType::Float64
            } else {
                return bad("a number");
            }
        }
        Arg::Num => match t {
            DataType::Null => DataType::Int32,
            DataType::Float16 => DataType::Float32,
            DataType::UInt8 | DataType::UInt16 => DataType::Int32,
            DataType::UInt32 | DataType::UInt64 => DataType::Int64,
            DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => DataType::Decimal128(*p, *s),
            t if t.is_numeric() => t.clone(),
            _ => return bad("a number"),
        },
        Arg::Temporal => match t {
            DataType::Date32 => DataType::Date32,
            DataType::Timestamp(_, tz) => DataType::Timestamp(TimeUnit::Microsecond, tz.clone()),
            DataType::Time32(_) | DataType::Time64(_) => DataType::Time64(TimeUnit::Microsecond),
            DataType::Date64
            | DataType::Null
            | DataType::Utf8
            | DataType::Utf8View
            | DataType::LargeUtf8 => DataType::Timestamp(TimeUnit::Microsecond, None),
            _ => return bad("a date, time or timestamp"),
        },
        Arg::StrOrBytes => match t {
            DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_) => DataType::Binary,
            t => javatext::text_source_type(t).unwrap_or(DataType::Utf8),
        },
        Arg::Any => match t {
            DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
            other => other.clone(),
        },
    })
}

impl ScalarUDFImpl for SeaFn {
    fn name(&self) -> &str {
        self.name
    }
    fn aliases(&self) -> &[String] {
        &self.aliases
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn coerce_types(&self, arg_types: &[DataType]) -> DFResult<Vec<DataType>> {
        let n = arg_types.len();
        let upper = self.name.to_uppercase();
        if n < self.min_args || self.max_args().is_some_and(|m| n > m) {
            let expected = match self.max_args() {
                Some(m) if m == self.min_args => format!("{m}"),
                Some(m) => format!("{} to {m}", self.min_args),
                None => format!("at least {}", self.min_args),
            };
            return plan_err!("function {upper}() takes {expected} argument(s), got {n}");
        }
        arg_types
            .iter()
            .enumerate()
            .map(|(k, t)| coerce_one(self.name, k, self.kind(k), t))
            .collect()
    }
    fn return_type(&self, arg_types: &[DataType]) -> DFResult<DataType> {
        (self.ret)(arg_types, &[])
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DFResult<FieldRef> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let t = (self.ret)(&types, args.scalar_arguments)?;
        Ok(Arc::new(Field::new(self.name, t, true)))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let rows = if all_scalar && !self.volatile {
            1
        } else {
            args.number_rows
        };
        let mut cols = Vec::with_capacity(args.args.len());
        for (k, a) in args.args.into_iter().enumerate() {
            let (arr, scalar) = match a {
                ColumnarValue::Array(arr) => (arr, false),
                ColumnarValue::Scalar(s) => (s.to_array_of_size(1)?, true),
            };
            let text = matches!(self.kind(k), Arg::Str | Arg::StrOrBytes)
                && javatext::text_source_type(arr.data_type()).is_some();
            cols.push((
                if text {
                    javatext::java_text(&arr)?
                } else {
                    arr
                },
                scalar,
            ));
        }
        let out = (self.kernel)(&Args { cols, rows }, args.return_field.data_type())?;
        if all_scalar && !self.volatile {
            Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?))
        } else {
            Ok(ColumnarValue::Array(out))
        }
    }
}

/// A fixed return type.
#[macro_export]
#[doc(hidden)]
macro_rules! ret {
    ($t:expr) => {{
        fn r(
            _: &[arrow::datatypes::DataType],
            _: &[Option<&datafusion::common::ScalarValue>],
        ) -> datafusion::common::Result<arrow::datatypes::DataType> {
            Ok($t)
        }
        r
    }};
}

/// The return type is the type of the first argument.
pub(crate) fn ret_first(t: &[DataType], _: &[Option<&ScalarValue>]) -> DFResult<DataType> {
    Ok(t.first().cloned().unwrap_or(DataType::Null))
}

/// A data error raised inside a function, shown as SeaTunnel shows it.
pub(crate) fn fn_error(name: &str, msg: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("function {}(): {msg}", name.to_uppercase()))
}

/// Every SeaTunnel function, by registry name.
pub(crate) fn all() -> Vec<Arc<ScalarUDF>> {
    let mut v = Vec::new();
    v.extend(string::functions());
    v.extend(numeric::functions());
    v.extend(datetime::functions());
    v.extend(des::functions());
    v.into_iter()
        .map(|f| Arc::new(ScalarUDF::new_from_impl(f)))
        .collect()
}

/// Functions by every name and alias, for replacing DataFusion's built-ins that the SQL
/// planner inserts directly (`EXTRACT` → `date_part`, `SUBSTRING(… FROM …)` → `substr`).
pub(crate) fn by_name(udfs: &[Arc<ScalarUDF>]) -> HashMap<String, Arc<ScalarUDF>> {
    let mut m = HashMap::new();
    for u in udfs {
        m.insert(u.name().to_string(), u.clone());
        for a in u.aliases() {
            m.insert(a.clone(), u.clone());
        }
    }
    m
}
