//! SeaTunnel's arithmetic where a DECIMAL takes part (`ZetaSQLFunction.executeBinaryExpr`):
//! the operands are taken as `BigDecimal`s, a double at its decimal text
//! (`BigDecimal.valueOf(double)`), so `dec * 1.1` is exact; a division keeps the largest
//! scale of the DECIMAL operands and rounds away from zero (`RoundingMode.UP`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array};
use arrow::datatypes::{DataType, Decimal128Type};
use datafusion::common::{Result as DFResult, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

use super::fn_error;
use super::numeric::shortest_decimal;

/// The largest precision of a DECIMAL.
const MAX_PRECISION: u8 = 38;

/// A double literal as the DECIMAL SeaTunnel computes with when the other operand is a
/// DECIMAL: the digits of its shortest text (`1.1` is 1.1 at scale 1), or `None` when they
/// do not fit a DECIMAL(38, s).
pub(crate) fn decimal_literal(v: f64) -> Option<ScalarValue> {
    if !v.is_finite() {
        return None;
    }
    let (m, scale) = shortest_decimal(v)?;
    let digits = m.unsigned_abs().checked_ilog10().map_or(1, |d| d + 1);
    let precision = digits.max(scale).max(1);
    if precision > u32::from(MAX_PRECISION) {
        return None;
    }
    Some(ScalarValue::Decimal128(
        Some(m),
        precision as u8,
        scale as i8,
    ))
}

/// `l / r` with a DECIMAL operand, as SeaTunnel divides: the quotient at `scale` (the
/// largest scale of the DECIMAL operands), rounded away from zero. Integer operands are
/// DECIMALs of scale 0.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct DecimalDivide {
    scale: i8,
    signature: Signature,
}

impl DecimalDivide {
    /// The division for a quotient of `scale` digits after the point.
    pub(crate) fn udf(scale: i8) -> Arc<ScalarUDF> {
        Arc::new(ScalarUDF::new_from_impl(DecimalDivide {
            scale,
            signature: Signature::any(2, Volatility::Immutable),
        }))
    }
}

impl ScalarUDFImpl for DecimalDivide {
    fn name(&self) -> &str {
        "decimal_divide"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _: &[DataType]) -> DFResult<DataType> {
        Ok(DataType::Decimal128(MAX_PRECISION, self.scale))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DFResult<ColumnarValue> {
        let rows = args.number_rows;
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let arrays = args
            .args
            .iter()
            .map(|a| match a {
                ColumnarValue::Array(a) => Ok(a.clone()),
                ColumnarValue::Scalar(s) => s.to_array_of_size(if all_scalar { 1 } else { rows }),
            })
            .collect::<DFResult<Vec<ArrayRef>>>()?;
        let [l, r] = arrays.as_slice() else {
            return Err(fn_error("/", "takes two operands"));
        };
        let out = divide(l, r, self.scale)?;
        Ok(if all_scalar {
            ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?)
        } else {
            ColumnarValue::Array(out)
        })
    }
}

/// An operand as DECIMAL digits and their scale (integers are scale 0).
fn as_decimal(a: &ArrayRef) -> DFResult<(ArrayRef, i8)> {
    match a.data_type() {
        DataType::Decimal128(_, s) => Ok((a.clone(), *s)),
        t if t.is_integer() || t.is_null() => Ok((
            arrow::compute::cast(a, &DataType::Decimal128(MAX_PRECISION, 0))?,
            0,
        )),
        t => Err(fn_error(
            "/",
            format!("a DECIMAL division got a {t} operand"),
        )),
    }
}

fn divide(l: &ArrayRef, r: &ArrayRef, scale: i8) -> DFResult<ArrayRef> {
    let (l, sl) = as_decimal(l)?;
    let (r, sr) = as_decimal(r)?;
    let (x, y) = (
        l.as_primitive::<Decimal128Type>(),
        r.as_primitive::<Decimal128Type>(),
    );
    // q = x·10^-sl / (y·10^-sr) at `scale` = x·10^(scale - sl + sr) / y, in units of 10^-scale.
    let shift = i32::from(scale) - i32::from(sl) + i32::from(sr);
    let overflow = || fn_error("/", "the quotient does not fit a DECIMAL(38)");
    let mut out = Vec::with_capacity(x.len());
    for i in 0..x.len() {
        if x.is_null(i) || y.is_null(i) {
            out.push(None);
            continue;
        }
        let (a, b) = (x.value(i), y.value(i));
        if b == 0 {
            return Err(fn_error("/", "division by zero"));
        }
        let (num, den) = if shift >= 0 {
            let f = 10i128.checked_pow(shift as u32).ok_or_else(overflow)?;
            (a.checked_mul(f).ok_or_else(overflow)?, b)
        } else {
            let f = 10i128.checked_pow((-shift) as u32).ok_or_else(overflow)?;
            (a, b.checked_mul(f).ok_or_else(overflow)?)
        };
        let (q, rem) = (num / den, num % den);
        // Away from zero when anything is left over.
        let q = if rem == 0 {
            q
        } else if (num < 0) == (den < 0) {
            q + 1
        } else {
            q - 1
        };
        if q.unsigned_abs() >= 10u128.pow(u32::from(MAX_PRECISION)) {
            return Err(overflow());
        }
        out.push(Some(q));
    }
    Ok(Arc::new(
        Decimal128Array::from(out).with_precision_and_scale(MAX_PRECISION, scale)?,
    ))
}
